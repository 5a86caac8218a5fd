/* Two byte loops of the token stream's way to a sketch, each one pass over a page's bytes.
 *
 * Each has a numpy twin in Python that defines it, runs where this module was not built, and
 * is the oracle the tests compare this one with; numpy needs a dozen or two array operations
 * per page for either, which for a page of a few thousand words costs about as much as the
 * fingerprints of all its shingles, and these loops a fraction of that.
 *
 *   join_words(folded: bytes) -> tuple[bytes, int]                     (dedup.canonical)
 *       folded: words separated by runs of spaces (UTF-8, no NUL); returns the words joined
 *       by single NULs and how many there are.
 *   units(data: bytes) -> tuple[bytearray, int] | None                 (dedup.units, §4.3)
 *       data: the tokens in UTF-8, joined by NUL; returns the units (native uint64, each read
 *       big-endian from its 8 bytes, the last of a token padded with NULs) and the number of
 *       tokens, or None when a token is empty.
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

static PyMethodDef methods[] = {
    {"join_words", join_words, METH_O,
     "join_words(folded) -> (bytes, words): the space-separated words joined by NUL"},
    {"units", units, METH_O,
     "units(data) -> (bytearray, tokens) | None: the 8-byte units of NUL-joined tokens"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dedup._tokens",
    "Byte loops of the token stream in C (see dedup.canonical and dedup.units).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__tokens(void)
{
    return PyModule_Create(&module);
}
