"""The XML layer of the URDF loader: xs:double numbers and a parser that refuses document type declarations."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from ..options import show  # noqa: F401  (part of this module's API)
from .body import ModelError

# The xs:double lexical space (XML Schema 1.1, which also allows "+INF"); [0-9] is ASCII only.
XS_DOUBLE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?INF|NaN")
XML_SPACE = re.compile(r"[ \t\r\n]+")
XS_DOUBLE_HELP = "optional sign, ASCII digits with an optional '.', optional exponent"
UNBOUNDED_HELP = "write an unbounded limit as 1.7976931348623157e+308"


def parse_xs_double(text: str) -> float:
    """One xs:double literal (surrounding XML white space allowed) as a finite float.

    Raises ``ValueError`` for text outside the xs:double lexical space and for
    the non-finite values it contains (``INF``, ``-INF``, ``NaN``, or a literal
    beyond the double range).
    """
    token = text.strip(" \t\r\n")
    value, problem = xs_double(token)
    if problem:
        raise ValueError(f"{show(token)} {problem}")
    return value


def xs_double(token: str):
    """(value, None) for a finite xs:double token, else (None, what is wrong with it)."""
    if not XS_DOUBLE.fullmatch(token):
        return None, f"is not numeric: not an xs:double ({XS_DOUBLE_HELP})"
    value = float(token)
    if math.isnan(value):
        return None, "is not finite: NaN is not allowed"
    if math.isinf(value):
        if token.lstrip("+-") == "INF":
            return None, f"is not finite: {token} is not allowed ({UNBOUNDED_HELP})"
        return None, "is not finite: beyond the double range (+-1.7976931348623157e+308)"
    return value, None


class _DoctypeRefused(Exception):
    def __init__(self, name):
        super().__init__(name)
        self.name = name


class _NoDoctypeTreeBuilder(ET.TreeBuilder):
    """Builds the element tree; refuses a document type declaration as soon as the parser meets it."""

    def doctype(self, name, pubid, system):
        # Called at the start of <!DOCTYPE, before its internal subset (where entities are declared)
        # and before any element; once this raises, the tree gets no more events. (expat may still
        # scan the rest of the buffer it was given; its own entity-amplification limit, expat >= 2.4,
        # bounds that scan, and external entities are never fetched.)
        raise _DoctypeRefused(name)


def parse_xml(source, label, text_source):
    parser = ET.XMLParser(target=_NoDoctypeTreeBuilder())
    try:
        if text_source:
            parser.feed(source)
            return parser.close()
        return ET.parse(source, parser=parser).getroot()
    except _DoctypeRefused as exc:
        raise ModelError(f"{label}: cannot read URDF: a document type declaration (<!DOCTYPE {exc.name} ...>) "
                         "is not allowed; URDFs need none, and entity declarations are refused") from None
    except ET.ParseError as exc:
        raise ModelError(f"{label}: cannot read URDF: {exc}") from None
    except (OSError, UnicodeError, LookupError, ValueError) as exc:
        # unreadable file, undecodable text, unknown declared encoding, NUL in a path
        raise ModelError(f"{label}: cannot read URDF: {type(exc).__name__}: {exc}") from None


def looks_like_xml(source) -> bool:
    if isinstance(source, str):
        return source.lstrip().startswith("<")
    if isinstance(source, bytes):
        return source.lstrip(b" \t\r\n").startswith(b"<") or source.startswith(
            (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"))
    return False
