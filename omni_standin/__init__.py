"""A local stand-in for a `vllm serve <model> --omni` server, backed by the Diffusers pipeline.

It answers the routes, fields, status codes, headers and error envelopes of vLLM-Omni 0.30's HTTP API for Cosmos 3
(docs/vllm-omni-contract.md), so the vLLM-Omni notebook runs unchanged against it or a real server. Start it with
`python -m omni_standin MODEL`. Modules: `cli` (flags, start-up, shutdown), `envelope` (error shapes), `forms`
(request parsing and validation), `values` (checks of JSON, `extra_params` and `lora` values), `limits` (what one
request may cost), `references` (fetching and decoding conditioning media), `engine` (the pipeline, one generation
at a time, stoppable), `jobs` (asynchronous video jobs), `storage` (the video folder and its cleaning), `app`
(routes, authentication, the body-size cap).
"""
