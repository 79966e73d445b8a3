/* Program entry for freestanding Hexagon Linux user programs (qemu-hexagon).
 * The kernel (or qemu) leaves argc at 0(sp), argv after it. We align the stack to the
 * HVX vector size so that spills of 128-byte vectors are aligned, call main and pass its
 * return value to exit_group (syscall 94, asm-generic numbering) via trap0(#1). */
	.text
	.globl	_start
	.type	_start,@function
_start:
	r0 = memw(r29+#0)
	r1 = add(r29,#4)
	r29 = and(r29,#-128)
	call	main
	r6 = #94
	trap0(#1)
	.size	_start, .-_start
