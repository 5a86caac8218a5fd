/* The loops of the token stream's way to a sketch, each one pass over a page's bytes or ids.
 *
 * Each has a numpy twin in Python that defines it, runs where this module was not built, and
 * is the oracle the tests compare this one with; numpy needs a dozen or two array operations
 * per page for any of them, which for a page of a few thousand words costs more than the
 * work itself, and these loops a fraction of that.
 *
 *   join_words(folded: bytes) -> tuple[bytes, int]                     (dedup.canonical)
 *       folded: words separated by runs of spaces (UTF-8, no NUL); returns the words joined
 *       by single NULs and how many there are.
 *   units(data: bytes) -> tuple[bytearray, int] | None                 (dedup.units, §4.3)
 *       data: the tokens in UTF-8, joined by NUL; returns the units (native uint64, each read
 *       big-endian from its 8 bytes, the last of a token padded with NULs) and the number of
 *       tokens, or None when a token is empty.
 *   windows(table, maps, units, w, out)                                (dedup.rabin)
 *       the Rabin fingerprints of the len(units) - w + 1 windows of w <= maps units, into out
 *       (uint64). table holds, for byte position k < 8 (0 the least significant) and
 *       byte value b, the `maps` images of b in position k side by side: image j of a unit u
 *       is the XOR over k of table[k][byte k of u][j], and window i the XOR over j < w of
 *       image w-1-j of unit i+j.
 *   smallest_distinct(ordered, s, out) -> (kept, distinct)              (dedup.sketches)
 *       ordered: ids sorted ascending; copies the first s distinct ids into out and returns
 *       how many it copied and how many distinct ids there are in all.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { UNIT = 8 };

static PyObject *join_words(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *data = view.buf;
    size_t size = (size_t)view.len;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *joined = PyBytes_AS_STRING(out), *at = joined;
    size_t words = 0;
    int in_word = 0;
    for (size_t i = 0; i < size; i++) {
        char byte = data[i];
        if (byte == ' ') {
            in_word = 0;
        } else {
            if (!in_word && words++)
                *at++ = '\0'; /* one NUL between two words */
            in_word = 1;
            *at++ = byte;
        }
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&out, at - joined) < 0)
        return NULL;
    return Py_BuildValue("(Nn)", out, (Py_ssize_t)words);
}

static PyObject *units(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    size_t size = (size_t)view.len;
    /* every unit holds at least one byte of the data: room for them all, trimmed after */
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(size * sizeof(uint64_t)));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint64_t *first = (uint64_t *)PyByteArray_AS_STRING(out), *unit = first;
    uint64_t value = 0;        /* the unit being filled, big-endian */
    int filled = 0;            /* its bytes so far */
    size_t in_token = 0;       /* bytes of the current token so far */
    size_t tokens = 1;
    int empty = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char byte = data[i];
        if (byte == 0) { /* a token ends: its last unit is padded with NULs */
            empty |= in_token == 0;
            if (filled)
                *unit++ = value << (8 * (UNIT - filled));
            value = 0;
            filled = 0;
            in_token = 0;
            tokens++;
        } else {
            value = value << 8 | byte;
            in_token++;
            if (++filled == UNIT) {
                *unit++ = value;
                value = 0;
                filled = 0;
            }
        }
    }
    empty |= in_token == 0;
    if (filled)
        *unit++ = value << (8 * (UNIT - filled));
    PyBuffer_Release(&view);
    if (empty) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (PyByteArray_Resize(out, (Py_ssize_t)((size_t)(unit - first) * sizeof(uint64_t))) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(Nn)", out, (Py_ssize_t)tokens);
}

/* A C-contiguous buffer of uint64 items (read-only unless `writable`). */
static int u64_items(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len % 8) {
        PyErr_Format(PyExc_ValueError, "%s is not a whole number of 8-byte items", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

enum { MAX_MAPS = 8 };

/* The window loop for a width known when compiled (each call below names one), so that the
 * loops over the w images unroll and the images stay in registers: with w a variable they
 * went through memory, and cost three times as much. */
static inline void window_loop(const uint64_t *entries, int maps, const uint64_t *unit,
                               Py_ssize_t n, uint64_t *window, const int w)
{
    /* partial[j]: the XOR so far of window i - j, which unit i + 1 continues; unit i gives
     * window i - j its image w-1-j, and completes window i - w + 1 */
    uint64_t partial[MAX_MAPS] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t images[MAX_MAPS] = {0};
        for (int k = 0; k < UNIT; k++) {
            const uint64_t *entry =
                entries + ((size_t)k * 256 + ((unit[i] >> (8 * k)) & 0xFF)) * (size_t)maps;
            for (int j = 0; j < w; j++)
                images[j] ^= entry[j];
        }
        for (int j = w - 1; j > 0; j--)
            partial[j] = partial[j - 1] ^ images[w - 1 - j];
        partial[0] = images[w - 1];
        if (i >= w - 1)
            window[i - w + 1] = partial[w - 1];
    }
}

static PyObject *windows(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *table_obj, *units_obj, *out_obj;
    int maps, w;
    if (!PyArg_ParseTuple(args, "OiOiO", &table_obj, &maps, &units_obj, &w, &out_obj))
        return NULL;
    if (maps < 1 || maps > MAX_MAPS || w < 1 || w > maps) {
        PyErr_Format(PyExc_ValueError, "need 1 <= w <= maps <= %d", MAX_MAPS);
        return NULL;
    }
    Py_buffer table, units, out;
    if (u64_items(table_obj, &table, 0, "table") < 0)
        return NULL;
    if (u64_items(units_obj, &units, 0, "units") < 0) {
        PyBuffer_Release(&table);
        return NULL;
    }
    if (u64_items(out_obj, &out, 1, "out") < 0) {
        PyBuffer_Release(&table);
        PyBuffer_Release(&units);
        return NULL;
    }
    Py_ssize_t n = units.len / 8, m = n - w + 1;
    const char *problem = NULL;
    if ((size_t)table.len < (size_t)UNIT * 256 * (size_t)maps * 8)
        problem = "the table is smaller than 8 byte positions of maps images";
    else if (m < 1 || out.len / 8 < m)
        problem = "out must hold the len(units) - w + 1 windows, and there must be one";
    if (problem) {
        PyBuffer_Release(&table);
        PyBuffer_Release(&units);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    const uint64_t *entries = table.buf, *unit = units.buf;
    uint64_t *window = out.buf;
    Py_BEGIN_ALLOW_THREADS
    switch (w) {
    case 1: window_loop(entries, maps, unit, n, window, 1); break;
    case 2: window_loop(entries, maps, unit, n, window, 2); break;
    case 3: window_loop(entries, maps, unit, n, window, 3); break;
    case 4: window_loop(entries, maps, unit, n, window, 4); break;
    default: window_loop(entries, maps, unit, n, window, w); break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&table);
    PyBuffer_Release(&units);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *smallest_distinct(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *ordered_obj, *out_obj;
    Py_ssize_t s;
    if (!PyArg_ParseTuple(args, "OnO", &ordered_obj, &s, &out_obj))
        return NULL;
    Py_buffer ordered, out;
    if (u64_items(ordered_obj, &ordered, 0, "ordered") < 0)
        return NULL;
    if (u64_items(out_obj, &out, 1, "out") < 0) {
        PyBuffer_Release(&ordered);
        return NULL;
    }
    const uint64_t *ids = ordered.buf;
    uint64_t *kept = out.buf;
    Py_ssize_t n = ordered.len / 8, room = out.len / 8, limit = s < room ? s : room;
    Py_ssize_t distinct = 0, copied = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && ids[i] == ids[i - 1])
            continue;
        if (i && ids[i] < ids[i - 1]) {
            PyBuffer_Release(&ordered);
            PyBuffer_Release(&out);
            PyErr_SetString(PyExc_ValueError, "ordered ids must be sorted ascending");
            return NULL;
        }
        if (copied < limit)
            kept[copied++] = ids[i];
        distinct++;
    }
    PyBuffer_Release(&ordered);
    PyBuffer_Release(&out);
    return Py_BuildValue("(nn)", copied, distinct);
}

static PyMethodDef methods[] = {
    {"join_words", join_words, METH_O,
     "join_words(folded) -> (bytes, words): the space-separated words joined by NUL"},
    {"units", units, METH_O,
     "units(data) -> (bytearray, tokens) | None: the 8-byte units of NUL-joined tokens"},
    {"windows", windows, METH_VARARGS,
     "windows(table, maps, units, w, out): Rabin fingerprints of the w-unit windows"},
    {"smallest_distinct", smallest_distinct, METH_VARARGS,
     "smallest_distinct(ordered, s, out) -> (kept, distinct): the first s distinct sorted ids"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dedup._tokens",
    "Loops of the token stream's way to a sketch, in C (see dedup.canonical, dedup.units, "
    "dedup.rabin and dedup.sketches).",
    -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tokens(void)
{
    return PyModule_Create(&module);
}
