"""A tiny, real experiment that exercises the whole protocol in well under a second (the harness's own tests)."""
