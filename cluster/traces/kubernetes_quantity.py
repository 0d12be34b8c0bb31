"""Kubernetes values as the API server parses them: ``resource.Quantity`` (`parse_quantity`,
`quantity_nano`: exact, in nano units) and RFC 3339 times (`rfc3339_seconds`), and the
kube-scheduler's rounding of totals (`cores`: up to the millicore, `gigabytes`: up to the
byte). A value Kubernetes would refuse raises `QuantityError` (a `ValueError`; the message
says why), or with `parse_quantity` a `TraceError` at the given file, row and field.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from pathlib import Path

from clusteremu.cluster.traces.table import TraceError

#: A quantity above this is refused (it would not fit the float the table keeps).
MAX_QUANTITY = 10**300

NANO = 10**9
BYTES_PER_GB = 2**30
#: Largest binary-SI quantity Kubernetes keeps (it caps larger ones silently), nano units.
_BINARY_CAP_NANO = (2**63 - 1) * NANO

_DECIMAL_SUFFIX = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
# Kubernetes' scanner: sign, digits, optional fraction, suffix letters, optional signed digits.
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")
_RFC3339_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)

Where = tuple[Path | str, int | None, str]
"""Where a value was read, for a `TraceError`: (file, 1-based row or None, field)."""


class QuantityError(ValueError):
    """A quantity (or time) Kubernetes would refuse (the message says why)."""


def quantity_nano(text: str | int | float) -> int:
    """A Kubernetes ``resource.Quantity`` as an exact integer of nano units (1e-9), parsed as
    ``resource.ParseQuantity`` parses it (the value rounded away from zero to the nano, a
    binary-SI value capped at 2^63 - 1). Raises `QuantityError`."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"expected a quantity (a string such as '500m'), got {text!r}")
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"expected a finite quantity, got {text!r}")
        text = repr(text)
    s = str(text).strip()
    if not s:
        raise QuantityError("expected a quantity, got an empty string")
    m = _QUANTITY_RE.fullmatch(s)
    if m is None:
        raise QuantityError(f"malformed quantity {s!r}")
    sign, whole, frac, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    binary = False
    if suffix in _DECIMAL_SUFFIX:
        exponent = _DECIMAL_SUFFIX[suffix]
    elif suffix in _BINARY_SUFFIX:
        exponent, binary = _BINARY_SUFFIX[suffix], True
    else:
        e = _EXPONENT_RE.fullmatch(suffix)
        if e is None or len(e.group(1)) > 20 or abs(int(e.group(1))) >= 2**63:
            raise QuantityError(f"malformed quantity {s!r}: unknown suffix {suffix!r}")
        exponent = int(e.group(1))
    digits = (whole + frac).lstrip("0")
    if not (whole + frac):
        # No digit at all ("m", "Ki", "-"): Kubernetes reads 0 on its fast path, and refuses
        # it where it would take its slow path (a scale below nano, or Pi / Ei).
        if (not binary and exponent < -9) or (binary and exponent >= 50):
            raise QuantityError(f"malformed quantity {s!r}: no digits")
        return 0
    if not digits:
        return 0
    if len(digits) > 1000:
        raise QuantityError(f"quantity of {len(digits)} digits: more than 1000")
    mantissa = int(digits)
    if binary:
        nano = (mantissa << exponent) * NANO
        # exact: mantissa x 2^exp / 10^len(frac), rounded away from zero to the nano
        scale = len(frac)
        q, r = divmod(nano, 10**scale)
        nano = min(q + (1 if r else 0), _BINARY_CAP_NANO)
    else:
        scale10 = exponent - len(frac) + 9  # nano = mantissa x 10^scale10
        if len(digits) + scale10 > 300 + 9:
            raise QuantityError(f"quantity {s!r} out of range (over 1e300)")
        if scale10 >= 0:
            nano = mantissa * 10**scale10
        elif len(digits) < -scale10:
            nano = 1  # below one nano: rounds up to 1n
        else:
            q, r = divmod(mantissa, 10**-scale10)
            nano = q + (1 if r else 0)
    if nano > MAX_QUANTITY * NANO:
        raise QuantityError(f"quantity {s!r} out of range (over 1e300)")
    return -nano if sign == "-" else nano


def parse_quantity(text: str | int | float, where: Where = ("quantity", None, "")) -> float:
    """A Kubernetes ``resource.Quantity`` as the plain number: cores for cpu, bytes for
    memory, a count for ``pods`` and GPUs. Parsed exactly as Kubernetes parses it:
    ``"64000m"`` -> 64.0, ``"1.5"``, ``"2"``, ``"262144Mi"`` -> 2^38, ``"256Gi"``, ``"1e9"``,
    ``"129M"``, ``"1k"``, ``"1Ki"``, ``"100n"`` -> 1e-7; decimal SI suffixes n u m k M G T P
    E, binary Ki Mi Gi Ti Pi Ei, exponents e / E; kept to the nano, rounding a finer value
    away from zero. A YAML number is read from its text.

    `where` is (file, row, field) for the `TraceError` a malformed quantity raises.
    """
    try:
        return quantity_nano(text) / NANO
    except QuantityError as e:
        raise TraceError(where[0], str(e), where[1], where[2]) from None


def cores(nano: int) -> float:
    """A cpu quantity (nano units) in cores, rounded up to the millicore as the
    kube-scheduler counts it."""
    return _ceil_div(nano, 10**6) / 1000


def gigabytes(nano: int) -> float:
    """A memory quantity (nano units of bytes) in GB (2^30 bytes), rounded up to the byte."""
    return _ceil_div(nano, NANO) / BYTES_PER_GB


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def rfc3339_seconds(value: object) -> float:
    """An RFC 3339 time (or a YAML timestamp) in seconds since the epoch; `QuantityError`
    for anything else."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    if not isinstance(value, str):
        raise QuantityError(f"expected an RFC 3339 time, got {value!r}")
    m = _RFC3339_RE.fullmatch(value.strip())
    if m is None:
        raise QuantityError(
            f"expected an RFC 3339 time such as 2024-05-01T10:00:00Z, got {value!r}"
        )
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        dt.datetime(y, mo, d, h, mi, s)
    except ValueError as e:
        raise QuantityError(f"bad time {value!r}: {e}") from None
    t = float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    if m.group(7):
        t += float("0" + m.group(7))
    tz = m.group(8)
    if tz != "Z":
        off = int(tz[1:3]) * 3600 + int(tz[4:6]) * 60
        t -= off if tz[0] == "+" else -off
    return t
