/* The clustering loop's small per-document array work, in C.
 *
 * Greedy clustering touches a few hundred fingerprints per document in four places: the
 * count-min sketch of how common each is (dedup.frequency), the Bloom filter of indexed ones
 * (storage.presence), and the merge of two MIN_s samples (dedup.estimators). In numpy each is
 * a dozen array operations on arrays of a hundred-odd values, so the calls, not the work, are
 * the cost; these loops do the work in about a microsecond.
 *
 * Each function has a numpy twin in Python that defines it, runs where this module was not
 * built, and is the oracle the tests compare it with. Positions are multiply-shift hashes:
 * the top `bits` bits of key * multiplier (mod 2^64), one multiplier per row or probe, passed
 * in by the caller so that the twins share them.
 *
 *   count_add(counts, multipliers, keys, bits)        counts[row][h_row(key)] += 1, where a
 *       counter met twice in one call counts once (as numpy's fancy += does); counts is
 *       uint32, the rows side by side, 2^bits each.
 *   count_min(counts, multipliers, keys, bits, out)   out[i] = min over rows of the counters.
 *   bloom_add(words, multipliers, keys, bits)         sets bit h_probe(key) of the bit array,
 *       2^bits bits in uint64 words (bits >= 6: one word at least).
 *   bloom_test(words, multipliers, keys, bits, out)   out[i] = 1 when every probe's bit is set.
 *   matches_min(x, y, s) -> (matches, s_prime)        x, y sorted without repeats: how many
 *       values both hold among the first s of their merged union, and how many values that
 *       prefix has (min(s, |x ∪ y|)).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A buffer of n items of `size` bytes each, C-contiguous: the arrays the twins hand over. */
static int items(PyObject *obj, Py_buffer *view, Py_ssize_t size, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : PyBUF_SIMPLE)) < 0)
        return -1;
    if (view->len % size) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of %zd-byte items",
                     what, view->len, size);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    Py_buffer table, multipliers, keys, out;
    int have_out;
    Py_ssize_t rows, n, cells; /* cells: items in the table */
    int shift;                 /* 64 - bits */
} probe_args;

static void release(probe_args *a)
{
    PyBuffer_Release(&a->table);
    PyBuffer_Release(&a->multipliers);
    PyBuffer_Release(&a->keys);
    if (a->have_out)
        PyBuffer_Release(&a->out);
}

/* Cells the table needs: `rows` rows of 2^bits counters, or one array of 2^bits bits in 64-bit
 * words; -1 when that many cells cannot be addressed. */
static Py_ssize_t cells_needed(Py_ssize_t rows, int bits, int table_rows)
{
    int log2 = table_rows ? bits : bits - 6; /* of the cells in one row */
    if (!table_rows)
        rows = 1;
    if (log2 >= (int)(8 * sizeof(Py_ssize_t)) - 1 || rows > (PY_SSIZE_T_MAX >> log2))
        return -1;
    return rows << log2;
}

/* Parse (table, multipliers, keys, bits[, out]); the table holds `item`-byte cells, and must
 * hold every row (2^bits counters each), or 2^bits bits: at least one whole word. */
static int parse(PyObject *args, probe_args *a, Py_ssize_t item, Py_ssize_t out_item,
                 int table_rows)
{
    PyObject *table, *multipliers, *keys, *out = NULL;
    int bits;
    if (!PyArg_ParseTuple(args, out_item ? "OOOiO" : "OOOi", &table, &multipliers, &keys, &bits,
                          &out))
        return -1;
    int least = table_rows ? 1 : 6; /* a Bloom filter of fewer than 64 bits has no word */
    if (bits < least || bits > 63) {
        PyErr_Format(PyExc_ValueError, "bits must be in [%d, 63]; got %d", least, bits);
        return -1;
    }
    memset(a, 0, sizeof *a);
    if (items(table, &a->table, item, 1, "table") < 0)
        return -1;
    if (items(multipliers, &a->multipliers, 8, 0, "multipliers") < 0) {
        PyBuffer_Release(&a->table);
        return -1;
    }
    if (items(keys, &a->keys, 8, 0, "keys") < 0) {
        PyBuffer_Release(&a->table);
        PyBuffer_Release(&a->multipliers);
        return -1;
    }
    a->rows = a->multipliers.len / 8;
    a->n = a->keys.len / 8;
    a->cells = a->table.len / item;
    a->shift = 64 - bits;
    if (out_item) {
        if (items(out, &a->out, out_item, 1, "out") < 0) {
            release(a);
            return -1;
        }
        a->have_out = 1;
        if (a->out.len / out_item < a->n) {
            PyErr_SetString(PyExc_ValueError, "out is shorter than keys");
            release(a);
            return -1;
        }
    }
    /* every position must fall inside the table */
    Py_ssize_t needed = cells_needed(a->rows, bits, table_rows);
    if (a->rows < 1)
        PyErr_SetString(PyExc_ValueError, "multipliers: at least one row or probe is needed");
    else if (needed < 0)
        PyErr_Format(PyExc_OverflowError,
                     "bits=%d and %zd rows need more cells than memory can address", bits, a->rows);
    else if (a->cells < needed)
        PyErr_Format(PyExc_ValueError,
                     "the table is smaller than bits and rows say: %zd cells, %zd needed",
                     a->cells, needed);
    else
        return 0;
    release(a);
    return -1;
}

/* Row (or probe) r's position of a key: the top bits of key * multiplier, mod 2^64. */
static inline uint64_t position(const probe_args *a, uint64_t key, Py_ssize_t r)
{
    return (key * ((const uint64_t *)a->multipliers.buf)[r]) >> a->shift;
}

/* Row r's counter of a key, in the table of rows side by side, 2^bits counters each. */
static inline Py_ssize_t counter(const probe_args *a, uint64_t key, Py_ssize_t r)
{
    return (r << (64 - a->shift)) + (Py_ssize_t)position(a, key, r);
}

static PyObject *count_add(PyObject *Py_UNUSED(module), PyObject *args)
{
    probe_args a;
    if (parse(args, &a, 4, 0, 1) < 0)
        return NULL;
    uint32_t *counts = a.table.buf;
    const uint64_t *keys = a.keys.buf;
    if (a.n > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(uint64_t) / a.rows) {
        release(&a);
        return PyErr_NoMemory();
    }
    Py_ssize_t total = a.n * a.rows;
    /* read every counter before writing any: a counter met twice gets old + 1 twice */
    uint64_t *cell = PyMem_Malloc((size_t)(total ? total : 1) * sizeof *cell);
    if (cell == NULL) {
        release(&a);
        return PyErr_NoMemory();
    }
    uint32_t *value = PyMem_Malloc((size_t)(total ? total : 1) * sizeof *value);
    if (value == NULL) {
        PyMem_Free(cell);
        release(&a);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t r = 0, k = 0; r < a.rows; r++)
        for (Py_ssize_t i = 0; i < a.n; i++, k++) {
            cell[k] = (uint64_t)counter(&a, keys[i], r);
            value[k] = counts[cell[k]] + 1u;
        }
    for (Py_ssize_t k = 0; k < total; k++)
        counts[cell[k]] = value[k];
    PyMem_Free(value);
    PyMem_Free(cell);
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *count_min(PyObject *Py_UNUSED(module), PyObject *args)
{
    probe_args a;
    if (parse(args, &a, 4, 4, 1) < 0)
        return NULL;
    const uint32_t *counts = a.table.buf;
    const uint64_t *keys = a.keys.buf;
    uint32_t *out = a.out.buf;
    for (Py_ssize_t i = 0; i < a.n; i++) {
        uint32_t least = UINT32_MAX;
        for (Py_ssize_t r = 0; r < a.rows; r++) {
            uint32_t c = counts[counter(&a, keys[i], r)];
            least = c < least ? c : least;
        }
        out[i] = least;
    }
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *bloom_add(PyObject *Py_UNUSED(module), PyObject *args)
{
    probe_args a;
    if (parse(args, &a, 8, 0, 0) < 0)
        return NULL;
    uint64_t *words = a.table.buf;
    const uint64_t *keys = a.keys.buf;
    for (Py_ssize_t i = 0; i < a.n; i++)
        for (Py_ssize_t r = 0; r < a.rows; r++) {
            uint64_t bit = position(&a, keys[i], r);
            words[bit >> 6] |= (uint64_t)1 << (bit & 63);
        }
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *bloom_test(PyObject *Py_UNUSED(module), PyObject *args)
{
    probe_args a;
    if (parse(args, &a, 8, 1, 0) < 0)
        return NULL;
    const uint64_t *words = a.table.buf;
    const uint64_t *keys = a.keys.buf;
    unsigned char *out = a.out.buf;
    for (Py_ssize_t i = 0; i < a.n; i++) {
        int all = 1;
        for (Py_ssize_t r = 0; r < a.rows && all; r++) {
            uint64_t bit = position(&a, keys[i], r);
            all = (words[bit >> 6] >> (bit & 63)) & 1;
        }
        out[i] = (unsigned char)all;
    }
    release(&a);
    Py_RETURN_NONE;
}

static PyObject *matches_min(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *xo, *yo;
    Py_ssize_t s;
    if (!PyArg_ParseTuple(args, "OOn", &xo, &yo, &s))
        return NULL;
    Py_buffer xv, yv;
    if (items(xo, &xv, 8, 0, "x") < 0)
        return NULL;
    if (items(yo, &yv, 8, 0, "y") < 0) {
        PyBuffer_Release(&xv);
        return NULL;
    }
    const uint64_t *x = xv.buf, *y = yv.buf;
    Py_ssize_t nx = xv.len / 8, ny = yv.len / 8, i = 0, j = 0, taken = 0, matches = 0;
    /* the merge of §4.4: take the smaller head; a value both hold is taken once, and shared */
    while (taken < s && (i < nx || j < ny)) {
        if (j >= ny || (i < nx && x[i] < y[j])) {
            i++;
        } else if (i >= nx || y[j] < x[i]) {
            j++;
        } else {
            i++;
            j++;
            matches++;
        }
        taken++;
    }
    PyBuffer_Release(&xv);
    PyBuffer_Release(&yv);
    return Py_BuildValue("(nn)", matches, taken);
}

static PyMethodDef methods[] = {
    {"count_add", count_add, METH_VARARGS,
     "count_add(counts, multipliers, keys, bits): count each key once in every row"},
    {"count_min", count_min, METH_VARARGS,
     "count_min(counts, multipliers, keys, bits, out): each key's least counter, into out"},
    {"bloom_add", bloom_add, METH_VARARGS,
     "bloom_add(words, multipliers, keys, bits): set each key's probe bits"},
    {"bloom_test", bloom_test, METH_VARARGS,
     "bloom_test(words, multipliers, keys, bits, out): 1 in out where every probe bit is set"},
    {"matches_min", matches_min, METH_VARARGS,
     "matches_min(x, y, s) -> (matches, s_prime): shared values among the first s of x ∪ y"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dedup._probes",
    "Count-min, Bloom filter and MIN_s merge loops in C (see dedup.frequency, "
    "storage.presence and dedup.estimators).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__probes(void)
{
    return PyModule_Create(&module);
}
