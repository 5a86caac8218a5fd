"""Polynomials over GF(2), held as Python ints: bit i is the coefficient of x^i.

Rabin fingerprints (Broder §4.1) are residues modulo a *random irreducible* polynomial; the
collision bound quoted there holds only because the modulus is irreducible and drawn at random.
This module supplies the arithmetic for that: carry-less multiplication, division, gcd, Rabin's
irreducibility test and a seeded search for an irreducible polynomial of a given degree.

Python ints make exact arithmetic easy to read and to check; the heavy, per-shingle work lives in
:mod:`dedup.rabin`, which only uses these functions to build its tables once per polynomial.

>>> bin(mul(0b11, 0b11))  # (x + 1)^2 = x^2 + 1: no carries in GF(2)
'0b101'
>>> is_irreducible(0b111), is_irreducible(0b101)  # x^2+x+1 is; x^2+1 = (x+1)^2 is not
(True, False)
"""

from __future__ import annotations

import random
from functools import lru_cache

__all__ = [
    "degree",
    "divmod_poly",
    "gcd",
    "is_irreducible",
    "mod",
    "mul",
    "mulmod",
    "powmod",
    "powmod_x",
    "random_irreducible",
    "square",
]

_X = 0b10  # the polynomial x


def degree(p: int) -> int:
    """Degree of ``p``; the zero polynomial has degree -1 by convention.

    >>> degree(1 << 64 | 0b11011), degree(1), degree(0)
    (64, 0, -1)
    """
    return p.bit_length() - 1


def mul(a: int, b: int) -> int:
    """Carry-less product ``a(x) · b(x)``.

    >>> mul(0b101, 0b11) == 0b1111  # (x^2 + 1)(x + 1) = x^3 + x^2 + x + 1
    True
    """
    if a.bit_length() < b.bit_length():
        a, b = b, a
    result = 0
    while b:
        low = b & -b  # lowest set bit of b
        result ^= a << (low.bit_length() - 1)
        b ^= low
    return result


def square(a: int) -> int:
    """``a(x)^2``: in characteristic 2 squaring spreads the bits, bit i moving to bit 2i.

    >>> square(0b1011) == 0b1000101  # (x^3 + x + 1)^2 = x^6 + x^2 + 1
    True
    """
    if a <= 0:
        return 0
    # Interleaving the binary digits with zeros is exactly the bit spreading.
    return int("0".join(format(a, "b")), 2)


def mod(a: int, p: int) -> int:
    """Remainder of ``a`` divided by ``p`` (``p`` nonzero).

    >>> mod(0b1000101, 0b1011)  # x^6 + x^2 + 1 = (x^3+x+1)^2, so the remainder is 0
    0
    """
    n = p.bit_length()
    if n == 0:
        raise ZeroDivisionError("polynomial division by zero")
    while (d := a.bit_length()) >= n:
        a ^= p << (d - n)
    return a


def divmod_poly(a: int, p: int) -> tuple[int, int]:
    """Quotient and remainder of ``a`` divided by ``p`` (``p`` nonzero).

    >>> divmod_poly(0b1111, 0b11)  # x^3+x^2+x+1 = (x^2+1)(x+1)
    (5, 0)
    """
    n = p.bit_length()
    if n == 0:
        raise ZeroDivisionError("polynomial division by zero")
    q = 0
    while (d := a.bit_length()) >= n:
        q |= 1 << (d - n)
        a ^= p << (d - n)
    return q, a


def mulmod(a: int, b: int, p: int) -> int:
    """``a · b mod p``."""
    return mod(mul(mod(a, p), mod(b, p)), p)


def powmod(a: int, e: int, p: int) -> int:
    """``a^e mod p`` by square-and-multiply (``e >= 0``).

    >>> powmod(0b10, 3, 0b111)  # x^3 = 1 modulo x^2 + x + 1
    1
    """
    if e < 0:
        raise ValueError(f"exponent must be non-negative; got {e}")
    result = mod(1, p)
    base = mod(a, p)
    for bit in format(e, "b"):
        result = mod(square(result), p)
        if bit == "1":
            result = mod(mul(result, base), p)
    return result


def powmod_x(e: int, p: int) -> int:
    """``x^e mod p``.

    >>> powmod_x(64, (1 << 64) | 0b11011) == 0b11011  # x^64 = x^4 + x^3 + x + 1
    True
    """
    return powmod(_X, e, p)


def gcd(a: int, b: int) -> int:
    """Greatest common divisor (GF(2) polynomials are monic, so it is unique).

    >>> gcd(mul(0b111, 0b11), mul(0b111, 0b1011)) == 0b111
    True
    """
    while b:
        a, b = b, mod(a, b)
    return a


def _prime_factors(n: int) -> list[int]:
    factors = []
    q = 2
    while q * q <= n:
        if n % q == 0:
            factors.append(q)
            while n % q == 0:
                n //= q
        q += 1
    if n > 1:
        factors.append(n)
    return factors


def is_irreducible(p: int) -> bool:
    """Rabin's test: ``p`` of degree n >= 1 is irreducible over GF(2) iff
    ``x^(2^n) ≡ x (mod p)`` and ``gcd(x^(2^(n/q)) − x, p) = 1`` for every prime q dividing n.

    The first condition says every root of p lies in GF(2^n), i.e. each irreducible factor has
    a degree dividing n; the second rules out factors whose degree divides a proper divisor n/q.

    >>> is_irreducible((1 << 64) | 0b11011)  # x^64 + x^4 + x^3 + x + 1
    True
    >>> is_irreducible(mul(0b111, 0b1011))
    False
    """
    n = degree(p)
    if n < 1:
        return False  # zero and the constant 1 are not irreducible
    x = mod(_X, p)
    checkpoints = {n // q for q in _prime_factors(n)}
    h = x  # h = x^(2^k) mod p after k squarings
    for k in range(1, n + 1):
        h = mod(square(h), p)
        if k in checkpoints and gcd(p, h ^ x) != 1:
            return False
    return h == x


def _small_irreducibles_product(max_degree: int) -> int:
    """Product of all irreducible polynomials of degree 1..max_degree except x.

    x^(2^k) − x is the product of all irreducibles whose degree divides k, so the least common
    multiple of those for k = 1..max_degree is the product we want; it is built by gcd arithmetic
    rather than by enumerating polynomials.
    """
    product = 1
    for k in range(1, max_degree + 1):
        full = (1 << (1 << k)) ^ _X  # x^(2^k) − x
        full, rem = divmod_poly(full, _X)  # drop the factor x
        assert rem == 0
        g = gcd(full, product)
        new, rem = divmod_poly(full, g)
        assert rem == 0
        product = mul(product, new)
    return product


# Product of small irreducible factors: a candidate sharing any of them is rejected for the
# price of one big remainder and one small gcd, before the O(n) squarings of Rabin's test.
# About 1 in 9 random candidates has no irreducible factor of degree <= 8.
_SIEVE_DEGREE = 8
_SIEVE = _small_irreducibles_product(_SIEVE_DEGREE)


@lru_cache(maxsize=1024, typed=True)  # typed: True must not hit the entry for 1
def random_irreducible(degree: int, seed: int) -> int:
    """A random irreducible polynomial of exactly ``degree``, deterministic for ``seed``.

    Candidates ``x^degree + (random lower terms) + 1`` are drawn from ``random.Random(seed)``
    (whose integer seeding is stable across Python versions, so stored sketches stay valid)
    until one passes :func:`is_irreducible`. About one candidate in ``degree / 2`` qualifies.

    >>> p = random_irreducible(64, seed=1)
    >>> (p.bit_length() - 1, p & 1, is_irreducible(p))
    (64, 1, True)
    >>> random_irreducible(64, seed=1) == p
    True
    """
    if not isinstance(degree, int) or isinstance(degree, bool) or degree < 1:
        raise ValueError(f"degree must be a positive integer; got {degree!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        # random.Random uses |seed|, so negative seeds would silently repeat positive ones
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if degree == 1:
        return 0b11  # x + 1: the only degree-1 polynomial with a nonzero constant term
    rng = random.Random(seed)
    top = 1 << degree
    while True:
        candidate = top | rng.getrandbits(degree) | 1
        if degree > _SIEVE_DEGREE and gcd(candidate, mod(_SIEVE, candidate)) != 1:
            continue
        if is_irreducible(candidate):
            return candidate
