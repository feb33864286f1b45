/*
 * dtype.c - layer 3 (torch): the one dtype table.  Per dtype: its torch
 * name, other torch spellings (torch.float, torch.half, ...), element size,
 * byte-swap unit and legacy typed storage class.  Everything in the library
 * that needs a dtype fact asks here.
 */
#include "torch.h"

#include <string.h>

const ck_dtype_row ck_dtype_rows[CK_DTYPE_COUNT] = {
    [CKPT_FLOAT64] = {"float64", "double", 8, 8, "DoubleStorage"},
    [CKPT_FLOAT32] = {"float32", "float", 4, 4, "FloatStorage"},
    [CKPT_FLOAT16] = {"float16", "half", 2, 2, "HalfStorage"},
    [CKPT_BFLOAT16] = {"bfloat16", NULL, 2, 2, "BFloat16Storage"},
    [CKPT_INT64] = {"int64", "long", 8, 8, "LongStorage"},
    [CKPT_INT32] = {"int32", "int", 4, 4, "IntStorage"},
    [CKPT_INT16] = {"int16", "short", 2, 2, "ShortStorage"},
    [CKPT_INT8] = {"int8", NULL, 1, 1, "CharStorage"},
    [CKPT_UINT8] = {"uint8", NULL, 1, 1, "ByteStorage"},
    [CKPT_BOOL] = {"bool", NULL, 1, 1, "BoolStorage"},
    [CKPT_COMPLEX64] = {"complex64", "cfloat", 8, 4, "ComplexFloatStorage"},
    [CKPT_COMPLEX128] = {"complex128", "cdouble", 16, 8, "ComplexDoubleStorage"},
    [CKPT_COMPLEX32] = {"complex32", "chalf", 4, 2, "ComplexHalfStorage"},
    [CKPT_FLOAT8_E4M3FN] = {"float8_e4m3fn", NULL, 1, 1, NULL},
    [CKPT_FLOAT8_E5M2] = {"float8_e5m2", NULL, 1, 1, NULL},
    [CKPT_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", NULL, 1, 1, NULL},
    [CKPT_FLOAT8_E5M2FNUZ] = {"float8_e5m2fnuz", NULL, 1, 1, NULL},
    [CKPT_FLOAT8_E8M0FNU] = {"float8_e8m0fnu", NULL, 1, 1, NULL},
    [CKPT_UINT16] = {"uint16", NULL, 2, 2, NULL},
    [CKPT_UINT32] = {"uint32", NULL, 4, 4, NULL},
    [CKPT_UINT64] = {"uint64", NULL, 8, 8, NULL},
    [CKPT_QINT8] = {"qint8", NULL, 1, 1, NULL},
    [CKPT_QUINT8] = {"quint8", NULL, 1, 1, NULL},
    [CKPT_QINT32] = {"qint32", NULL, 4, 4, NULL},
    [CKPT_QUINT4X2] = {"quint4x2", NULL, 1, 1, NULL},
    [CKPT_QUINT2X4] = {"quint2x4", NULL, 1, 1, NULL},
    [CKPT_BITS8] = {"bits8", NULL, 1, 1, NULL},
    [CKPT_BITS16] = {"bits16", NULL, 2, 2, NULL},
    [CKPT_BITS1X8] = {"bits1x8", NULL, 1, 1, NULL},
    [CKPT_BITS2X4] = {"bits2x4", NULL, 1, 1, NULL},
    [CKPT_BITS4X2] = {"bits4x2", NULL, 1, 1, NULL},
};

/* Storage classes of quantized tensors: their stored integers. */
static const struct {
    const char *storage;
    uint8_t dtype;
} quantized_storages[] = {
    {"QInt8Storage", CKPT_QINT8},       {"QUInt8Storage", CKPT_QUINT8},
    {"QInt32Storage", CKPT_QINT32},     {"QUInt4x2Storage", CKPT_QUINT4X2},
    {"QUInt2x4Storage", CKPT_QUINT2X4},
};

static bool eq(const char *a, size_t an, const char *b)
{
    return b && strlen(b) == an && memcmp(a, b, an) == 0;
}

const char *ck_dtype_name(ckpt_dtype d)
{
    return (unsigned)d < CK_DTYPE_COUNT ? ck_dtype_rows[d].name : "unknown";
}
size_t ck_dtype_swap_unit(ckpt_dtype d)
{
    return (unsigned)d < CK_DTYPE_COUNT ? ck_dtype_rows[d].unit : 1;
}
const char *ckpt_dtype_name(ckpt_dtype d)
{
    return ck_dtype_name(d);
}
size_t ckpt_dtype_size(ckpt_dtype d)
{
    return ck_dtype_size(d);
}

int ck_dtype_by_torch_name(const char *name, size_t n, ckpt_dtype *d)
{
    for (unsigned i = 0; i < CK_DTYPE_COUNT; i++)
        if (eq(name, n, ck_dtype_rows[i].name) || eq(name, n, ck_dtype_rows[i].alias)) {
            *d = (ckpt_dtype)i;
            return 0;
        }
    return -1;
}

int ck_dtype_by_storage_class(const char *name, size_t n, ckpt_dtype *d)
{
    for (unsigned i = 0; i < CK_DTYPE_COUNT; i++)
        if (eq(name, n, ck_dtype_rows[i].storage)) {
            *d = (ckpt_dtype)i;
            return 0;
        }
    for (size_t i = 0; i < sizeof quantized_storages / sizeof quantized_storages[0]; i++)
        if (eq(name, n, quantized_storages[i].storage)) {
            *d = (ckpt_dtype)quantized_storages[i].dtype;
            return 0;
        }
    return -1;
}

/* ---- conj and neg bits (torch 2.x saves such views unresolved) ------------ */

static bool is_float(ckpt_dtype d)
{
    return d == CKPT_FLOAT64 || d == CKPT_FLOAT32 || d == CKPT_FLOAT16 || d == CKPT_BFLOAT16 ||
           d == CKPT_COMPLEX32 || d == CKPT_COMPLEX64 || d == CKPT_COMPLEX128;
}

bool ck_dtype_negatable(ckpt_dtype d)
{
    /* what torch's neg has a CPU kernel for */
    return is_float(d) || d == CKPT_INT64 || d == CKPT_INT32 || d == CKPT_INT16 || d == CKPT_INT8 ||
           d == CKPT_UINT8;
}

/* Negate one native-order unit of `unit` bytes: IEEE sign flip or two's
 * complement. */
static void negate_unit(uint8_t *p, size_t unit, bool fp)
{
    if (unit == 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        x = fp ? x ^ 0x8000000000000000u : 0u - x;
        memcpy(p, &x, 8);
    } else if (unit == 4) {
        uint32_t x;
        memcpy(&x, p, 4);
        x = fp ? x ^ 0x80000000u : 0u - x;
        memcpy(p, &x, 4);
    } else if (unit == 2) {
        uint16_t x;
        memcpy(&x, p, 2);
        x = (uint16_t)(fp ? x ^ 0x8000u : 0u - x);
        memcpy(p, &x, 2);
    } else if (unit == 1) {
        *p = (uint8_t)(0u - *p);
    }
}

void ck_dtype_resolve(ckpt_dtype d, bool conj, bool neg, uint8_t *p, size_t n)
{
    size_t unit = ck_dtype_swap_unit(d), size = ck_dtype_size(d);
    bool fp = is_float(d);
    if (!unit || !size || (!conj && !neg)) return;
    for (size_t i = 0; i + size <= n; i += size)
        for (size_t j = 0; j < size; j += unit)
            /* conj negates the imaginary part (the second unit), neg both;
             * both: the real part only */
            if (neg != (conj && j > 0)) negate_unit(p + i + j, unit, fp);
}
