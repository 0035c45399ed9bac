"""flashtrie.sglang - an SGLang custom logit processor that keeps requests
inside a FlashTrie library.

SGLang applies a CustomLogitProcessor to the logits of the requests that
name it: __call__(logits, custom_param_list) gets the batch's rows and,
per row, the request's custom_params dict, into which the server puts the
request itself under "__req__" (its output_ids are the generated tokens).
Start the server with --enable-custom-logit-processor and send:

    from flashtrie.sglang import FlashTrieLogitProcessor
    sampling_params = {"max_new_tokens": 16, "custom_params": {
        "flashtrie_index": "/srv/library.fti", "flashtrie_eos": 2}}
    requests.post(url + "/generate", json={"input_ids": prompt,
        "sampling_params": sampling_params,
        "custom_logit_processor": FlashTrieLogitProcessor.to_str()})

A row whose params carry "flashtrie_output_ids" uses those instead of
__req__ (for callers that keep the prefix themselves).
"""
from __future__ import annotations

from .vllm import _walker, constrain_row

try:
    from sglang.srt.sampling.custom_logit_processor import \
        CustomLogitProcessor as _Base
except Exception:  # pragma: no cover - SGLang is optional
    import json

    class _Base:  # the shape of SGLang's base, for import without SGLang
        @classmethod
        def to_str(cls) -> str:
            return json.dumps({"callable": cls.__module__ + "." + cls.__name__})


class FlashTrieLogitProcessor(_Base):
    """FlashTrieLogitProcessor: see the module's docstring."""

    def __call__(self, logits, custom_param_list=None):
        if not custom_param_list:
            return logits
        for i, params in enumerate(custom_param_list):
            if not params or not params.get("flashtrie_index"):
                continue
            ids = params.get("flashtrie_output_ids")
            if ids is None:
                req = params.get("__req__")
                ids = list(getattr(req, "output_ids", []) or [])
            walker = _walker(params["flashtrie_index"],
                             params.get("flashtrie_vocab"))
            constrain_row(walker, ids, logits[i], params.get("flashtrie_eos"))
        return logits
