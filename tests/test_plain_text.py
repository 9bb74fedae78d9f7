"""ui.widgets.plain, the one escape of text for a place that renders Markdown: what it makes of hostile strings,
and a tooltip that quoted a typed model name (issue 37). The browser walk is tests/test_hostile_browser.py."""
from __future__ import annotations

import re

import pytest

from tests.apptest import app, as_read
from ui.widgets import JOINER, plain

HOSTILE = ['![i](http://127.0.0.1:9/x.png)', '<img src="http://127.0.0.1:9/y">', "[j](javascript:alert(1))",
           "<http://127.0.0.1:9/z>", "see http://127.0.0.1:9/auto, WWW.evil.example and me@evil.example",
           ":red[red] :material/warning: $x^2$ **b** _i_ # h &amp; `c`"]


@pytest.mark.no_store
@pytest.mark.parametrize("text", HOSTILE)
def test_plain_leaves_nothing_markdown_reads(text):
    out = plain(text)
    assert as_read(out) == text  # read back as written
    bare = re.sub(r"\\[!-/:-@\[-`{-~]", "", out)  # what Markdown sees once the escaped characters are set aside
    assert not re.search(r"[!-/:-@\[-`{-~]", bare.replace(JOINER, "")), bare
    assert not re.search(r"(?i)https?:\\?/|www\\?\.|\w@\w", out.replace("\\", ""))  # no autolink can start


def test_a_typed_model_name_in_the_estimate_tooltip_is_text(home_store, fresh_caches):
    typed = "m ![i](http://127.0.0.1:9/tip.png)"
    app()
    did = home_store.list_datasets()[0]["id"]
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.coherence").check().run()  # a judged metric: the judge's form and the estimate
    at.selectbox(key="judge.provider").set_value("OpenAI-compatible base URL").run()
    at.text_input(key="judge.base_url").input("http://127.0.0.1:9/v1").run()
    at.text_input(key="judge.model").input(typed).run()
    tip = next(m.proto.help for m in at.metric if m.label == "Tokens (est.)")
    assert f"no tokenizer known for model '{typed}'" in as_read(tip) and typed not in tip
