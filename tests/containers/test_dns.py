"""tests/containers/dns.py: the stand-in cluster DNS answers every question NXDOMAIN (no podman needed)."""

from __future__ import annotations

import struct

from .dns import HEADER, nxdomain_answer

# A query for A llm-sglang-0.llm-sglang.default, recursion desired, as glibc sends it.
QNAME = b"".join(bytes([len(p)]) + p for p in (b"llm-sglang-0", b"llm-sglang", b"default")) + b"\0"
QUERY = HEADER.pack(0x1234, 0x0100, 1, 0, 0, 0) + QNAME + struct.pack(">HH", 1, 1)


def test_a_query_gets_nxdomain_with_its_question_echoed():
    answer = nxdomain_answer(QUERY)
    assert answer is not None
    ident, flags, qd, an, ns, ar = HEADER.unpack_from(answer)
    assert (ident, qd, an, ns, ar) == (0x1234, 1, 0, 0, 0)
    assert flags & 0x8000 and flags & 0x000F == 3  # a response; RCODE NXDOMAIN
    assert flags & 0x0100  # recursion desired, echoed
    assert answer[HEADER.size:] == QNAME + struct.pack(">HH", 1, 1)


def test_an_edns_record_after_the_question_is_not_echoed():
    opt = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    query = HEADER.pack(7, 0x0100, 1, 0, 0, 1) + QNAME + struct.pack(">HH", 28, 1) + opt
    answer = nxdomain_answer(query)
    assert answer is not None and answer.endswith(QNAME + struct.pack(">HH", 28, 1))


def test_what_is_not_a_query_gets_nothing():
    assert nxdomain_answer(b"\0" * 5) is None
    assert nxdomain_answer(HEADER.pack(1, 0x8180, 1, 0, 0, 0) + QNAME + b"\0\1\0\1") is None  # a response
    assert nxdomain_answer(HEADER.pack(1, 0x0100, 1, 0, 0, 0) + QNAME[:5]) is None  # cut short
