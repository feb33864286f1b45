#include <ckpt.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ckpt_options opt;
    ckpt_options_init(&opt);          /* safe limits; opt.key = "state_dict" to select a key */
    ckpt_error err;
    ckpt_file *f = ckpt_open(argv[1], &opt, &err);
    if (!f) {
        fprintf(stderr, "%s (byte %lld)\n", err.message, (long long)err.offset);
        return 1;
    }
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        ckpt_tensor t;                  /* a copy: a listing keeps nothing per tensor */
        if (ckpt_tensor_get(f, i, &t, &err) != 0) break;
        printf("%s %s ndim=%u nbytes=%llu\n", t.name, ckpt_dtype_name(t.dtype), t.ndim,
               (unsigned long long)t.nbytes);
    }
    const ckpt_tensor *w = ckpt_find(f, "model.fc1.weight");
    if (w) {                            /* bytes are read here, not at open */
        void *buf = malloc(w->nbytes);
        if (buf && ckpt_tensor_read(f, w, buf, w->nbytes, &err) == 0)
            printf("first element: %g\n", (double)((float *)buf)[0]);
        free(buf);
    }
    const ckpt_value *epoch = ckpt_value_get(ckpt_root(f), "epoch");   /* non-tensor values */
    printf("epoch %lld\n", (long long)ckpt_value_int(epoch));
    ckpt_close(f);
    return 0;
}
