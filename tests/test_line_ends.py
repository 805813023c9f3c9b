"""Plain output drops the spaces that end a line, however the text is cut into writes."""

from __future__ import annotations

import io
import re

from hypothesis import given
from hypothesis import strategies as st

from tcx.renderers.line_ends import LineEnds


@given(st.lists(st.text(alphabet=" \nab\t", max_size=12), max_size=12))
def test_spaces_before_each_newline_are_dropped_across_writes(chunks):
    out = io.StringIO()
    stream = LineEnds(out)
    for chunk in chunks:
        stream.write(chunk)
    whole = "".join(chunks)
    expected = re.sub(r" +\n", "\n", whole)
    # Spaces at the very end are held until the next write shows whether the line goes on.
    assert out.getvalue() == expected.rstrip(" ")
