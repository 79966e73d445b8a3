/* QEMU TCG plugin: exact execution count of every Hexagon packet, by address.
 *
 * On Hexagon, one plugin "instruction" is one packet. At translation time every packet
 * gets an inline counter (no callback per execution); a packet's counter is keyed by its
 * guest address, so re-translated blocks add to the same counter. At exit the plugin
 * writes one line per executed packet address:
 *     <address hex> <executions> <bytes> <hvx 0|1>
 * "hvx" is 1 when QEMU's own disassembly of the packet names an HVX register (V, Q) or
 * a vector memory access. The Python driver maps addresses to functions with the ELF
 * symbol table. Usage: qemu-hexagon -cpu v67 -plugin build/packet_count.so,out=FILE prog
 * Built with gcc (Debian ships no QEMU plugins and no plugin header; see
 * qemu_plugin_api.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define SLOTS (1u << 16) /* open-addressing table; a kernel program has a few thousand packets */

struct slot {
    uint64_t vaddr;
    uint64_t count; /* incremented inline by the translated code */
    uint32_t bytes;
    uint8_t used, hvx;
};

static struct slot *table;
static char out_path[4096];
static int overflow;

static int is_hvx(const char *dis) {
    if (strstr(dis, "vmem") || strstr(dis, "vtmp") || strstr(dis, "vgather") || strstr(dis, "vscatter"))
        return 1;
    for (const char *p = dis; *p; p++) {
        int boundary = p == dis || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (boundary && (*p == 'V' || *p == 'Q') && isdigit((unsigned char)p[1])) return 1;
    }
    return 0;
}

static struct slot *lookup(uint64_t vaddr) {
    uint32_t h = (uint32_t)((vaddr >> 2) * 2654435761u) & (SLOTS - 1);
    for (uint32_t probe = 0; probe < SLOTS; probe++, h = (h + 1) & (SLOTS - 1)) {
        if (!table[h].used || table[h].vaddr == vaddr) return &table[h];
    }
    return NULL;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        struct slot *s = lookup(vaddr);
        if (!s) {
            overflow = 1;
            continue;
        }
        if (!s->used) {
            char *dis = qemu_plugin_insn_disas(insn);
            s->used = 1;
            s->vaddr = vaddr;
            s->bytes = (uint32_t)qemu_plugin_insn_size(insn);
            s->hvx = dis ? (uint8_t)is_hvx(dis) : 0;
            free(dis);
        }
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &s->count, 1);
    }
}

static void on_exit_(qemu_plugin_id_t id, void *userdata) {
    (void)id;
    (void)userdata;
    FILE *f = fopen(out_path, "w");
    if (!f) {
        fprintf(stderr, "packet_count: cannot write %s\n", out_path);
        return;
    }
    fprintf(f, "# packet_count v1: address executions bytes hvx%s\n", overflow ? " (TABLE OVERFLOW)" : "");
    for (uint32_t i = 0; i < SLOTS; i++)
        if (table[i].used && table[i].count)
            fprintf(f, "%llx %llu %u %u\n", (unsigned long long)table[i].vaddr,
                    (unsigned long long)table[i].count, table[i].bytes, table[i].hvx);
    fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv) {
    if (info->system_emulation || strcmp(info->target_name, "hexagon") != 0) {
        fprintf(stderr, "packet_count: only for qemu-hexagon user mode (got %s)\n", info->target_name);
        return -1;
    }
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "out=", 4) == 0) snprintf(out_path, sizeof out_path, "%s", argv[i] + 4);
    if (!out_path[0]) {
        fprintf(stderr, "packet_count: missing argument out=FILE\n");
        return -1;
    }
    table = calloc(SLOTS, sizeof *table);
    if (!table) return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
    return 0;
}
