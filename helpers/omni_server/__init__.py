"""A local stand-in for a `vllm serve <model> --omni` server, backed by the Diffusers pipeline.

It answers the routes, fields, status codes, headers and error envelopes of ../shared/spec/vllm-omni-api.md
(vllm-omni 0.30.0), so the vLLM-Omni notebook and `helpers.omni_client` run unchanged against it or a real server.
Start it with `python -m helpers.serve MODEL`. Modules: `envelope` (error shapes), `forms` (request parsing and
validation), `engine` (the pipeline, one generation at a time), `jobs` (asynchronous video jobs), `app` (routes).
"""
