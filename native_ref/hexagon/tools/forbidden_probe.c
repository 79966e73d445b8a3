/* Deliberately forbidden code, built only by `make isa-selftest` (for HVX v69 with qfloat),
 * which must see tools/check_isa.py refuse both kernels: a qfloat add (HVX v68 float: aborts
 * qemu-hexagon 7.2) and an integer HVX v69 shift (integer, yet newer than the emulator). */
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

HVX_Vector probe_qfloat_hvx(HVX_Vector a, HVX_Vector b) { return Q6_Vqf32_vadd_VsfVsf(a, b); }
HVX_Vector probe_v69_int_hvx(HVX_VectorPair a, HVX_Vector b) { return Q6_Vub_vasr_WuhVub_sat(a, b); }
HVX_Vector probe_v66_int_hvx(HVX_Vector a, HVX_Vector b) { return Q6_Vw_vadd_VwVw(a, b); }
void probe(void) {}
