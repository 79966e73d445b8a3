/* Executor output: the interval CSV and the JSON summary (see docs/native-cpu.md). */
#include <stdlib.h>

#include "common.h"
#include "pipeline_int.h"

static const char *kind_name(char k) {
    return k == 'r' ? "read" : k == 'c' ? "compute" : k == 'n' ? "nonffn" : "wait";
}

void pipe_write_intervals(const pipe_t *p, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) die_sys("open %s", path);
    fputs("kind,layer,group,bank,start_ns,end_ns,bytes,tokens\n", f);
    for (int i = 0; i < p->nlog; i++) {
        const interval_t *v = &p->log[i];
        fprintf(f, "%s,%d,%d,%d,%lld,%lld,%lld,%d\n", kind_name(v->kind), v->layer, v->group, v->bank,
                (long long)v->start, (long long)v->end, (long long)v->bytes, v->tokens);
    }
    if (fclose(f) != 0) die_sys("write %s", path);
}

static void i64_array(FILE *out, const int64_t *v, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)v[i]);
    fputc(']', out);
}

static void write_config(const pipe_t *p, FILE *out) {
    const run_config *c = p->cfg;
    fputs("  \"config\": {\"file\": ", out);
    json_str(out, c->file);
    fputs(", \"routing\": ", out);
    json_str(out, c->routing_path);
    fputs(", \"intervals\": ", out);
    if (c->intervals_path) json_str(out, c->intervals_path);
    else fputs("null", out);
    fprintf(out, ",\n    \"layers\": %d, \"experts\": %d, \"hidden\": %d, \"inter\": %d, \"tokens\": %d, \"top_k\": %d,\n",
            p->L, p->E, p->lay.hidden, p->lay.inter, p->T, p->k);
    fprintf(out, "    \"group_size\": %d, \"banks\": %d, \"queue_depth\": %d, \"prefetch\": \"%s\", \"threads\": %d,\n",
            c->group_size, c->banks, c->queue_depth, prefetch_name(c->prefetch), c->threads);
    fprintf(out, "    \"nonffn_dim\": %d, \"nonffn_reps\": %d, \"io\": \"%s\", \"seed\": %llu, \"pack_seed\": %llu,\n",
            p->dim, c->nonffn_reps, c->io == IO_AUTO ? "auto" : c->io == IO_DIRECT ? "direct" : "buffered",
            (unsigned long long)c->seed, (unsigned long long)p->hdr->seed);
    fprintf(out, "    \"expert_bytes\": %llu, \"expert_stride_bytes\": %llu, \"groups_per_layer\": %d, \"bank_bytes\": %lld, "
            "\"arena_bytes\": %lld},\n",
            (unsigned long long)p->hdr->expert_bytes, (unsigned long long)p->hdr->expert_stride, p->gpl,
            (long long)c->group_size * (long long)p->hdr->expert_stride,
            (long long)c->banks * c->group_size * (long long)p->hdr->expert_stride);
}

static void write_machine(FILE *out, const char *fs) {
    machine_info m;
    machine_info_get(&m);
    fputs("  \"machine\": {\"cpu_model\": ", out);
    json_str(out, m.cpu_model);
    fprintf(out, ", \"cores_online\": %d, \"kernel\": ", m.cores_online);
    json_str(out, m.kernel);
    fputs(", \"filesystem\": ", out);
    json_str(out, fs);
    fprintf(out, ", \"timestamp\": \"%s\"}\n", m.timestamp);
}

void pipe_write_summary(const pipe_t *p, FILE *out) {
    int active = 0;
    for (int i = 0; i < p->ngroups; i++) active += p->g[i].active;
    fputs("{\n", out);
    fprintf(out, "  \"makespan_s\": %.9f, \"makespan_ns\": %lld,\n", (double)p->makespan * 1e-9, (long long)p->makespan);
    fprintf(out, "  \"bubble_ns\": %lld, \"expert_phase_ns\": %lld, \"bubble_share\": %.6f, \"bubble_share_total\": %.6f,\n",
            (long long)p->bubble, (long long)p->phase, p->phase ? (double)p->bubble / (double)p->phase : 0.0,
            p->makespan ? (double)p->bubble / (double)p->makespan : 0.0);
    fprintf(out, "  \"nonffn_ns\": %lld, \"compute_ns\": %lld,\n", (long long)p->nonffn_total, (long long)p->compute_total);
    fprintf(out, "  \"bytes_read\": %lld, \"reads\": %d, \"wasted_reads\": %d, \"active_groups\": %d, "
            "\"computed_groups\": %d, \"max_reads_in_flight\": %d,\n",
            (long long)p->bytes_read, p->reads, p->wasted, active, p->computed, p->max_in_flight);
    fprintf(out, "  \"direct_io\": %s, \"filesystem\": ", p->io.direct ? "true" : "false");
    json_str(out, p->io.fs);
    fputs(",\n  \"layer_bubble_ns\": ", out);
    i64_array(out, p->layer_bubble, p->L);
    fputs(",\n  \"layer_expert_phase_ns\": ", out);
    i64_array(out, p->layer_phase, p->L);
    fputs(",\n", out);
    write_config(p, out);
    write_machine(out, p->io.fs);
    fputs("}\n", out);
}
