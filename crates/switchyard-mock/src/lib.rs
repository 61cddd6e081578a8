//! Mock upstream LLM providers — OpenAI (Chat Completions and Responses), Azure OpenAI,
//! Anthropic, Gemini, Amazon Bedrock (Converse, InvokeModel, with SigV4) and Google Vertex AI
//! (Gemini and Claude, with the OAuth2 service-account flow) wire formats, plus embeddings
//! and token counting — with fault injection, for switchyard's tests, demo (`switchyard
//! serve` with no config), benchmark (`switchyard mock --listen ADDR`) and scripted
//! agent-CLI runs.
//!
//! The wire output is built independently of the gateway's own types (plain
//! `serde_json::Value` with preserved key order) and follows the recorded fixtures in
//! `fixtures/providers/`: OpenAI non-stream bodies are 2-space pretty JSON with a trailing
//! newline, streams `data: {compact}\n\n` + `data: [DONE]\n\n`; Anthropic compact JSON and
//! `event: X\ndata: {…}\n\n` streams (message_start, content_block_start, ping,
//! content_block_delta, content_block_stop, message_delta, message_stop); Gemini 2-space
//! pretty bodies and `data: {…}\r\n\r\n` streams with no terminator; Responses 2-space
//! pretty bodies with non-ASCII as `\uXXXX` and no trailing newline, streams
//! `event: X\ndata: {compact}\n\n` with `sequence_number` 0, 1, 2 … on every event and no
//! `[DONE]` (details in the `responses` module); Bedrock compact JSON with keys in
//! alphabetical order and `application/vnd.amazon.eventstream` binary streams (sections
//! below); Vertex as Gemini and Anthropic with Vertex's extras.
//!
//! # Endpoints
//!
//! | | |
//! |---|---|
//! | `POST /v1/chat/completions`, `POST /chat/completions` | OpenAI (stream with `"stream": true`; `stream_options.include_usage` adds the `choices: []` usage chunk; a whole answer has `n` choices, each billed — a stream has one) |
//! | `POST /openai/deployments/{deployment}/chat/completions?api-version=…` | Azure OpenAI: OpenAI format, `model` = deployment |
//! | `POST /v1/messages` | Anthropic (stream with `"stream": true`) |
//! | `POST /v1beta/models/{model}:generateContent` | Gemini (`/v1/models/…` accepted too) |
//! | `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` | Gemini SSE (always SSE, `alt` is not checked) |
//! | `POST /v1/responses`, `POST /responses`, `POST /openai/v1/responses` (Azure) | OpenAI Responses (stream with `"stream": true`): `response.created`, `response.in_progress`, per item `output_item.added` … `output_item.done`, `response.completed` with usage. Non-stream shaped like `openai-responses/responses_text.response.json` (2025 field set), streams like `stream_text.sse` (2026 field set; `type` first, other keys alphabetical). Request parameters are echoed with the API's defaults. No `GET /v1/responses/{id}`, no `previous_response_id` store |
//! | `POST /v1/responses/input_tokens`, `POST /responses/input_tokens` | `{"input_tokens": N, "object": "response.input_tokens"}` (pretty, no newline) |
//! | `POST /v1/messages/count_tokens` (`?beta=true` accepted) | `{"input_tokens":N}` (compact); `model` required |
//! | `POST /v1beta/models/{model}:countTokens` | `{"totalTokens": N, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": N}]}`; body `{contents}` or `{generateContentRequest: {…}}` |
//! | `POST /v1/embeddings`, `POST /embeddings`, `POST /openai/deployments/{d}/embeddings` | OpenAI embeddings: `input` string, strings, token array or token arrays; `dimensions`; `encoding_format` `float` (default) or `base64` (little-endian f32) |
//! | `POST /v1beta/models/{model}:embedContent` | `{embedding: {values}, usageMetadata}`; `outputDimensionality` |
//! | `POST /v1beta/models/{model}:batchEmbedContents` | `{embeddings: [{values}]}` in request order; a request's `model` must be `models/{model}` (else 400) |
//! | `GET /v1/models`, `GET /models` | OpenAI model list; with an `anthropic-version` header, Anthropic's (`anthropic/models_list.response.json`) |
//! | `GET /v1beta/models` | Gemini model list (`{"models": [Model…]}`, pretty) |
//! | `GET /openai/models?api-version=…` | Azure OpenAI model list (compact) |
//! | `POST /model/{modelId}/converse` | Bedrock Converse (`bedrock/converse_text.response.json`); `{modelId}` percent-encoded (`%3A`) or literal (`:`), decoded |
//! | `POST /model/{modelId}/converse-stream` | Bedrock ConverseStream: event-stream frames |
//! | `POST /model/{modelId}/invoke` | Bedrock InvokeModel, Anthropic body → Anthropic message (`msg_bdrk_mock_<seq>`) + `x-amzn-bedrock-*-token-count` headers |
//! | `POST /model/{modelId}/invoke-with-response-stream` | the same as event-stream `chunk` frames |
//! | `POST /model/{modelId}/count-tokens` | `{"inputTokens":N}` for `{"input":{"converse":{…}}}` or `{"input":{"invokeModel":{"body":"<base64>"}}}` |
//! | `POST /token` | Vertex's OAuth2 token endpoint (JWT-bearer grant) |
//! | `POST /` | AWS STS `AssumeRoleWithWebIdentity` (form body, XML answer; see the Amazon Bedrock section) |
//! | `GET /mock/stats` | the counters, for a mock in another process: `{"requests", "abandoned_bodies", "sigv4_verified", "sigv4_rejected", "token_requests", "tokens_issued", "sts_requests", "sts_credentials_issued"}` (the [`MockServer`] methods of those names); not recorded, takes no behavior |
//! | `POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent` (`:streamGenerateContent?alt=sse`, `:countTokens`) | Gemini on Vertex |
//! | `POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict` (`:streamRawPredict`) | Claude on Vertex; `…/models/count-tokens:rawPredict` counts (model in the body) |
//! | anything else | 404, OpenAI-style JSON error |
//!
//! Token counts (`N` above) are the prompt tokens a generation with the same body reports in
//! its usage (rule below), so a test can predict them. Embedding vectors are deterministic
//! unit vectors derived from each input text (same text → same floats; base64 decodes to
//! exactly the float answer), 8 dimensions unless the request asks for 1..=4096; usage
//! `prompt_tokens` = characters of all inputs / 4 (at least 1; token-array inputs count
//! their tokens); the Gemini single embed reports `usageMetadata` the same way, the batch
//! none (as recorded).
//!
//! # Answers
//!
//! * Text: `"Hello from the mock {openai|anthropic|gemini|bedrock} provider."` (Azure and
//!   Responses say `openai`, Bedrock Converse `bedrock`, Bedrock InvokeModel and Claude on
//!   Vertex `anthropic`, Gemini on Vertex `gemini`), streamed as word pieces (each word with
//!   the whitespace before it).
//! * Usage: prompt tokens = characters (Unicode scalar values) of all system (Responses:
//!   `instructions`), message and tool-result text / 4, at least 1 (tool definitions,
//!   tool-call arguments and reasoning items do not count); completion tokens = number of
//!   pieces (+ reasoning pieces; a tool call counts its argument fragments of 8 characters).
//! * `model` in the response is the request's (Azure: the deployment; Gemini: `modelVersion`
//!   = the model in the URL).
//! * Tools: when the request has tools, the tool choice is not none, there is no tool result
//!   after the last user text and no prefill, the answer is one call of the named tool (or the
//!   first function tool) with arguments synthesized from its schema `properties`: string →
//!   `"mock"` (first `enum` value if there is one), number/integer → 1, boolean → true, else
//!   null. Responses: `tools` of type `function` and `custom` count (hosted tools such as
//!   `web_search` do not); `tool_choice` `"none"`, `{"type": "function"|"custom", "name"}`
//!   or `allowed_tools` (its first function/custom tool); a `custom` tool is only picked
//!   when named or when it is the only kind offered, and is answered with a
//!   `custom_tool_call` item whose `input` is `"mock"`. Ids are `call_mock_<seq>` /
//!   `toolu_mock_<seq>` (Anthropic, also on Bedrock and Vertex) / `tooluse_mock_<seq>`
//!   (Converse) (`seq` = request number since start); Responses items are
//!   `fc_mock_<seq>` / `ctc_mock_<seq>` with `call_id` `call_mock_<seq>`, `msg_mock_<seq>`,
//!   `rs_mock_<seq>`, in `resp_mock_<seq>`.
//! * Tool results (OpenAI `role: tool`, Anthropic `tool_result`, Gemini `functionResponse`,
//!   Responses `function_call_output` / `custom_tool_call_output`, Converse `toolResult`
//!   whose `content` items are `text` or compact `json`) after the last user text:
//!   `"Tool result received: <content text>"` (several results joined by `\n`; a Gemini
//!   response object is its compact JSON, or the string of a lone `{"result": "…"}`). Text
//!   blocks in the same Anthropic user message as a `tool_result` (Claude Code's reminders),
//!   and text parts beside a Gemini `functionResponse`, do not start a new user turn.
//! * Responses `input`: a string is one user message; `message` items (with or without
//!   `type`, content a string or `input_text`/`output_text` parts) of role `user` are user
//!   text, other roles only count for usage; `function_call`, `custom_tool_call`,
//!   `reasoning` and other items are ignored for the answer. There is no prefill.
//! * Prefill: when the last message is an assistant (Gemini `model`) text message whose text
//!   is a prefix of the full answer, only the remainder is answered (re-split into word
//!   pieces, no reasoning). A prefill that is not a prefix gets the full answer. (Converse:
//!   a last assistant message without `toolUse`.)
//!
//! # Behavior
//!
//! A [`Behavior`] is chosen per request from, first found wins: (1) the queue set with
//! [`MockServer::script`]; (2) the `x-mock-behavior` request header holding Behavior JSON;
//! (3) a top-level body field `"mock": {…}`; (4) [`MockServer::set_default`]. Invalid
//! Behavior JSON (including unknown fields) gets a 400. Fields (all optional):
//!
//! | field | effect |
//! |---|---|
//! | `text` | answer text (wins over the default and the tool-result text) |
//! | `chunks` | split the answer into exactly N pieces: consecutive words are grouped (the first `words % N` pieces get one extra word); if the text has fewer than N words it becomes `"word1 word2 … wordN"` |
//! | `reasoning` | reasoning before the answer: OpenAI `reasoning_content` (DeepSeek style), Anthropic `thinking` block, Gemini `thought: true` part, Responses `reasoning` item with one `summary_text` (streamed as `reasoning_summary_*` events; `encrypted_content` when the request's `include` has `reasoning.encrypted_content`) |
//! | `tool_loop` | `{"tool": "Bash", "arguments": {"command": "ls"}, "final": "Done: {result}"}` (each key optional): a scripted one-step tool loop for agent CLIs, in every format, stream or not. While there is no tool result after the last user turn the answer is one call of `tool` (default: the tool rule's pick) with `arguments` (any JSON, default: synthesized from the tool's schema; for a Responses `custom` tool a string is the `input`), whatever `tool_choice` says and even when `tool` is not among the tools offered — but a request that offers no tools at all (an agent's side request: title, topic) gets a normal answer. The request that carries the result is answered with `final` (default: `text`, else `"Tool result received: {result}"`), every `{result}` replaced by the result text. A new user turn starts the loop again. Settable per request (`x-mock-behavior`, body `mock`) or for the whole server ([`MockServer::set_default`], or `SWITCHYARD_MOCK_BEHAVIOR` for [`run`]) |
//! | `cached_tokens` | prompt tokens reported as read from the prompt cache (default 0), a part of the prompt: OpenAI `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, Gemini `cachedContentTokenCount` + `cacheTokensDetails` (only when > 0), Responses `input_tokens_details.cached_tokens`. OpenAI `prompt_tokens`, Gemini `promptTokenCount` and Responses `input_tokens` stay the whole prompt; Anthropic `input_tokens` is the prompt less the cache read and write tokens. Stream and non-stream alike (Anthropic: `message_start` and `message_delta`; Gemini: every frame) |
//! | `cache_write_tokens` | prompt tokens reported as written to the prompt cache (default 0; only Anthropic reports them): `cache_creation_input_tokens` and `cache_creation.ephemeral_5m_input_tokens`. The two are clamped so that `cached_tokens + cache_write_tokens` never exceeds the prompt tokens, `cache_write_tokens` reduced first, then `cached_tokens` |
//! | `latency_ms` | delay before the response headers |
//! | `chunk_delay_ms` | delay between stream events |
//! | `status`, `headers`, `body` | respond with this status, headers and body (a JSON string is sent verbatim, other JSON compact); `headers` are also added to normal answers. On the Bedrock and Vertex routes a `status` without `body` serves the platform's error for that status (see their sections) |
//! | `fixture` | serve an error envelope by name, e.g. `"openai/error_429_rate_limit_tokens"`, `"anthropic/error_529_overloaded"`, `"gemini/error_429_resource_exhausted"`, `"openai-responses/error_400_model_not_found"`, `"bedrock/error_429_throttling"`, `"vertex/anthropic_error_429_quota"` (every `error_*.http.json` of openai, openai-responses, anthropic, gemini, azure, deepseek, qwen, bedrock, vertex, and `vertex/oauth/error_400_invalid_grant`; see [`fixtures::names`]; `openai-responses` bodies are pretty without a newline, error keys in the wire order message, type, param, code; OpenAI, Gemini and Vertex `body` envelopes pretty with a newline, the others compact, `body_raw` verbatim; `content-length` and `transfer-encoding` are always the served body's, a list header value is joined with `, `) |
//! | `fault` | one of the faults below |
//! | `error_message` | the `message` of the error a `fixture` or a `midstream_error` serves, instead of the recorded one (every `"message"` string replaced, all other bytes as recorded); `{key}` in it is replaced by the API key the request carried (bearer, `x-api-key`, `x-goog-api-key`, `api-key` or `?key=`), as providers echo a bad key back |
//! | `fault_rate` | a number in 0..=1: the failure part of the behavior (`fixture`, `status`, `fault`) applies only to that fraction of requests, drawn at random per request; the others get a normal answer (`latency_ms`, `chunks`, `headers`, … still apply). E.g. `{"fixture": "openai/error_429_rate_limit_tokens", "fault_rate": 0.5}` rate-limits about half the requests. Absent: every request. Outside 0..=1: 400 |
//! | `after_events` | events sent before `cut`, `stall`, `bad_event`, `midstream_error` act (default 0) |
//! | `first_event_delay_ms` | for `first_event_delay` |
//! | `drip_bytes`, `drip_delay_ms` | for `drip` (piece size default 1) |
//! | `bedrock_exception` | Bedrock streams: the `:exception-type` of a `midstream_error` — `throttlingException` (default), `serviceUnavailableException`, `modelStreamErrorException`, `validationException` (payloads of `bedrock/stream_exception_*.eventstream`), `internalServerException`, `modelTimeoutException`; anything else is a 400 |
//!
//! Faults (`"fault": "…"`):
//! * `drop` — the connection is closed without any response.
//! * `hang` — the response headers never come.
//! * `first_event_delay` — 200 + headers at once; the first event (non-stream: the body)
//!   after `first_event_delay_ms`.
//! * `cut` — `after_events` events, then the connection is aborted mid-body (the client sees
//!   an incomplete chunked body). Non-stream: half the body, then abort.
//! * `stall` — `after_events` events, then nothing while the connection stays open.
//!   Non-stream: half the body, then nothing.
//! * `no_finish` — the stream ends cleanly with no finish reason (OpenAI: no finish chunk, no
//!   usage chunk; Anthropic: no `message_delta`; Gemini: no `finishReason`; Responses: no
//!   `response.completed`; Converse: no `messageStop`, no `metadata`) and no terminator.
//! * `no_terminator` — finish reason sent, no `data: [DONE]` / `message_stop` (Gemini streams
//!   never have one; for Responses, whose `response.completed` is both, like `no_finish`;
//!   Converse: `messageStop` but no `metadata`).
//! * `bad_event` — one unparsable event (`data: {not json`; Bedrock: a well-framed event
//!   whose payload is `{not json`) after `after_events` events, then the stream goes on
//!   normally.
//! * `midstream_error` — after `after_events` events, the provider's in-band error (OpenAI
//!   `data: {"error":…}`, Anthropic `event: error` overloaded, Gemini a bare JSON error object,
//!   all verbatim from the fixtures; Responses `event: error` then `event: response.failed`
//!   with the payloads of `openai-responses/stream_error_failed.sse`, `insufficient_quota`,
//!   numbered on from `after_events`; Bedrock one `exception` frame, `bedrock_exception`,
//!   byte-identical to `bedrock/stream_exception_throttlingException.eventstream` by default,
//!   its `message` replaced inside the frame by `error_message`; Vertex as Gemini / Anthropic),
//!   then the stream ends. No effect on non-stream requests.
//! * `malformed_json` — non-stream: 200 with the first half of the JSON body. Stream: like
//!   `bad_event`.
//! * `drip` — the whole response body written in `drip_bytes`-byte pieces, `drip_delay_ms`
//!   apart.
//!
//! Order of effects: the `fault_rate` roll, `latency_ms`, then `drop`/`hang`, then the route (404), the key check
//! ([`MockServer::set_valid_keys`]; Responses uses the OpenAI 401; Bedrock: SigV4, Vertex: the
//! bearer token instead), `fixture`, `status`, request validation, and finally the answer.
//! The model lists check the key too, refusing a bad one as the provider does (OpenAI
//! `openai/error_401_invalid_api_key`, Azure `azure/error_401_access_denied`, Anthropic
//! `anthropic/error_401_authentication`, Gemini `gemini/error_400_api_key_invalid`), and then
//! answer the list: they take no `fixture` or `status`, and never the next scripted behavior
//! (a gateway's background key check must not eat a test's script).
//! Embeddings and token counts take every behavior too; having no stream, the stream-only
//! faults act as on any non-stream body (`cut`/`stall` after half, `malformed_json`, `drip`).
//!
//!
//! # Amazon Bedrock
//!
//! * **SigV4.** Every `/model/…` request must be signed for the credentials of
//!   [`MockServer::set_aws_credentials`] ([`AwsCredentials`]; default `AKIDEXAMPLE` /
//!   `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, no session token, region `us-east-1`). The
//!   signature is recomputed with the `aws-sigv4` signer for the request as received: the
//!   method, the path and query exactly as sent (so `%3A` and `:` sign differently, both
//!   are fine), the headers `SignedHeaders` lists (`host` required), the SHA-256 of the exact
//!   body, the request's `X-Amz-Date` and signing name `bedrock`, the credential scope's date
//!   and region (which must be the configured one). Refusals are 403 with `{"message":…}` and
//!   `x-amzn-errortype: InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/`
//!   (mismatch, no `Authorization` — "Missing Authentication Token" —, malformed header, wrong
//!   service or region, `X-Amz-Date` more than 5 minutes off the mock's clock
//!   ([`MockServer::set_clock`]), a session token missing, wrong or unexpected) or
//!   `UnrecognizedClientException` (an unknown access key id). Counted by
//!   [`MockServer::sigv4_verified`] / [`MockServer::sigv4_rejected`]. Bedrock API keys
//!   (`Authorization: Bearer`) are not accepted; [`MockServer::set_valid_keys`] does not apply.
//! * **STS** (`POST /`, for `AWS_ENDPOINT_URL_STS`): `AssumeRoleWithWebIdentity` as the AWS
//!   SDKs send it (form `Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=
//!   arn:aws:iam::<12 digits>:role/<name>&RoleSessionName=…&WebIdentityToken=…`, unsigned)
//!   answers STS's XML with temporary credentials (`ASIAMOCK000000000001`, …, a secret, a
//!   session token, `Expiration` [`MockServer::set_sts_lifetime`] seconds ahead on the
//!   mock's clock, default 3600). Those are accepted for SigV4 on the Bedrock routes beside
//!   the [`MockServer::set_aws_credentials`] ones — with their session token — until they
//!   expire (then 403 `ExpiredTokenException`). A token other than
//!   [`MockServer::set_web_identity_token`]'s (default [`DEFAULT_WEB_IDENTITY_TOKEN`]) is a
//!   400 `InvalidIdentityToken` that does not repeat it; a missing parameter
//!   `ValidationError`, another action `InvalidAction`. Counted by
//!   [`MockServer::sts_requests`]; issued sets in [`MockServer::sts_credentials`]. STS
//!   takes `latency_ms`, `drop` and `hang` from a header or default behavior, never the
//!   script.
//! * **Converse** bodies are validated as Bedrock does (400 `ValidationException`): no
//!   `model` key, `messages[]` of `user`/`assistant` starting with `user` and alternating,
//!   `content` always an array of one-key blocks (`text`, `image`, `document`, `toolUse`,
//!   `toolResult`, `reasoningContent`, `cachePoint`, …), `system[]` of `text`/`cachePoint`
//!   blocks, `toolConfig.tools[]` of `toolSpec{name, inputSchema.json}` / `cachePoint`,
//!   `toolChoice` `auto`/`any`/`tool{name}`, and a `toolConfig` whenever the history holds
//!   `toolUse`/`toolResult`. The answer: `{"metrics":{"latencyMs"},"output":{"message":
//!   {"content":[…],"role":"assistant"}},"stopReason","usage"}`, compact, keys alphabetical;
//!   content `reasoningContent.reasoningText{signature,text}` (with `reasoning`), `text`, or
//!   `toolUse{input,name,toolUseId}`; `stopReason` `end_turn` / `tool_use`; `usage`
//!   `{inputTokens, outputTokens, totalTokens}` with `inputTokens` = prompt − cache read −
//!   cache write and `totalTokens` = prompt + output.
//! * **Cache rule.** `cacheReadInputTokens`, `cacheWriteInputTokens` and their legacy
//!   duplicates `cacheReadInputTokenCount`, `cacheWriteInputTokenCount` appear when the
//!   request has `cachePoint` blocks (or the behavior sets `cached_tokens` /
//!   `cache_write_tokens`, which then give the numbers). Without behavior numbers: the
//!   prompt text before the last `cachePoint` (tools, then system, then messages) is the
//!   prefix, `P` = its characters / 4; the first request with that prefix (same model, same
//!   text) since the server started writes `P`, later ones read `P` (0 → both 0).
//! * **ConverseStream**: `content-type: application/vnd.amazon.eventstream`, chunked, one
//!   frame per event, headers `:event-type`, `:content-type: application/json`,
//!   `:message-type: event` in that order, both CRCs: `messageStart{p,role}`; per block
//!   (reasoning, text) `contentBlockDelta{contentBlockIndex,delta,p}` word pieces — reasoning
//!   ends with a `signature` delta — and `contentBlockStop`; a tool block opens with
//!   `contentBlockStart{…,start.toolUse{name,toolUseId}}` and streams `delta.toolUse.input`
//!   string fragments of 8 characters; then `messageStop{p,stopReason}` and
//!   `metadata{metrics,p,usage}`. Payloads compact, keys alphabetical, `"p"` a deterministic
//!   1–62 character prefix of `a…z A…Z 0…9` (recorded frames rebuild byte for byte).
//! * **InvokeModel** takes the Anthropic Messages body with `anthropic_version:
//!   "bedrock-2023-05-31"`, `max_tokens`, `messages`, and neither `model` nor `stream`
//!   (else 400 `ValidationException` "Malformed input request: …"); the answer is the
//!   Anthropic mock's with id `msg_bdrk_mock_<seq>` and the headers
//!   `x-amzn-bedrock-{input,output,cache-read-input,cache-write-input}-token-count`,
//!   `x-amzn-bedrock-invocation-latency` (`input` = uncached input tokens). The stream
//!   variant sends one `chunk` frame `{"bytes":"<base64 event JSON>","p":…}` per Anthropic
//!   event, no `ping`, `amazon-bedrock-invocationMetrics{inputTokenCount,outputTokenCount,
//!   invocationLatency,firstByteLatency}` on `message_stop`.
//! * **CountTokens** answers the prompt tokens a generation with that body reports
//!   (`inputTokens` + cache read + cache write).
//! * **Errors**: `{"message":…}` + `x-amzn-errortype: <Name>:http://internal.amazon.com/coral/com.amazon.bedrock/`
//!   and `x-amzn-requestid`. A bare `status` serves: 400 `bedrock/error_400_validation_input_too_long`
//!   ("Input is too long for requested model."), 403 `error_403_access_denied`, 404
//!   `error_404_resource_not_found_eol`, 429 `error_429_throttling`, 503
//!   `error_503_service_unavailable`; 408 `ModelTimeoutException`, 424
//!   `ModelErrorException`, other 5xx `InternalServerException`, other 4xx
//!   `ValidationException`. Streams fail before the first frame the same way (JSON).
//!
//! # Vertex AI
//!
//! * **Token endpoint** `POST /token`, form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`:
//!   the RS256 assertion must be signed by the service account of
//!   [`MockServer::set_service_account`] (default `vertex/oauth/service_account.test.json`,
//!   [`DEFAULT_SERVICE_ACCOUNT`]; checked by re-signing — RS256 is deterministic), `kid` (if
//!   any) its `private_key_id`, `iss` its `client_email`, `aud`
//!   `https://oauth2.googleapis.com/token` (or the account's `token_uri`, or this mock's
//!   `http://{host}/token`), `scope` containing `https://www.googleapis.com/auth/cloud-platform`,
//!   `0 < exp − iat ≤ 3600`, `exp` after and `iat` at most 5 minutes ahead of the mock's clock.
//!   Success `{"access_token":"ya29.mock-<n>","expires_in":<lifetime>,"token_type":"Bearer"}`
//!   (compact; lifetime [`MockServer::set_token_lifetime`], default 3599 s). Refusals are 400
//!   RFC 6749 bodies in Google's 1-space style: `invalid_grant` "Invalid JWT Signature."
//!   (byte-identical to `vertex/oauth/error_400_invalid_grant.http.json`), "Invalid grant:
//!   account not found", "Invalid JWT: Failed audience check. …", "Invalid JWT: Token must
//!   be a short-lived token (60 minutes) and in a reasonable timeframe. …"; `invalid_scope`;
//!   `unsupported_grant_type`; `invalid_request`. Counted by [`MockServer::token_requests`]
//!   (every request) and [`MockServer::tokens_issued`]. The token endpoint takes
//!   `latency_ms`, `drop` and `hang` from a header or default behavior, never the script.
//! * **Bearer check.** Every Vertex call needs `Authorization: Bearer <token minted here, not
//!   expired on the mock's clock, not revoked>` ([`MockServer::revoke_tokens`]), else 401
//!   `UNAUTHENTICATED` (google.rpc.Status, pretty, `details[0]` an `ErrorInfo` with reason
//!   `CREDENTIALS_MISSING`, `ACCESS_TOKEN_TYPE_UNSUPPORTED` or `ACCESS_TOKEN_EXPIRED`, and
//!   `www-authenticate`).
//! * **Gemini** (`publishers/google`): the Gemini mock's answer plus `createTime` (RFC 3339
//!   with microseconds, the mock's clock), `responseId` `vrtx_mock_<seq>` and
//!   `usageMetadata.trafficType: "ON_DEMAND"`, no `safetyRatings`
//!   (`vertex/gemini_generate_text.response.json`); stream frames have `content.role` before
//!   `parts`, `usageMetadata` `{"trafficType":"ON_DEMAND"}` only until the last frame, which
//!   has the counts, and `content-disposition: attachment`. `:countTokens` adds
//!   `totalBillableCharacters` (prompt characters) and takes `systemInstruction`/`tools` at
//!   the top level or the `generateContentRequest` wrapper.
//! * **Claude** (`publishers/anthropic`): the Anthropic mock's answer, id
//!   `msg_vrtx_mock_<seq>`, `request-id: req_vrtx_mock_<seq>`; the body needs
//!   `anthropic_version: "vertex-2023-10-16"`, `max_tokens`, `messages` and no `model` (else
//!   400 Anthropic `invalid_request_error`); `:streamRawPredict` streams whatever the body's
//!   `stream` says. `count-tokens:rawPredict` answers `{"input_tokens":N}` (model in the body).
//! * **Errors.** A bare `status` serves 400 `vertex/error_400_context_length`, 403
//!   `vertex/error_403_permission_denied`, 429 `vertex/error_429_resource_exhausted` — on the
//!   Claude routes 429 is the array-wrapped `vertex/anthropic_error_429_quota` and 529
//!   `anthropic/error_529_overloaded` —, other statuses a google.rpc.Status (`UNAUTHENTICATED`,
//!   `NOT_FOUND`, `INTERNAL`, `UNAVAILABLE`, `DEADLINE_EXCEEDED`, …).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use switchyard_mock::{Behavior, Fault, MockServer};
//! let mock = MockServer::start("127.0.0.1:0").await?;
//! mock.script(vec![
//!     Behavior::fixture("openai/error_429_rate_limit_tokens"),
//!     Behavior::fault(Fault::Cut).after(3),
//! ]);
//! println!("{}", mock.base_url());
//! # Ok(()) }
//! ```

/// `include_str!` of a file under `fixtures/providers/`.
macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/providers/",
            $path
        ))
    };
}

mod answer;
mod anthropic;
mod bedrock;
mod behavior;
mod conv;
mod embeddings;
mod eventstream;
mod faults;
pub mod fixtures;
mod flavors;
mod gemini;
mod handler;
mod json;
mod openai;
mod render;
mod responses;
mod server;
mod sigv4;
mod sts;
mod text;
mod time;
mod tokens;
mod tracked;
mod vertex;

pub use behavior::{Behavior, Fault, ToolLoop, BEDROCK_STREAM_EXCEPTIONS};
pub use server::{MockServer, RecordedRequest, MAX_RECORDED};
pub use sigv4::AwsCredentials;
pub use sts::{DEFAULT_STS_LIFETIME_SECS, DEFAULT_WEB_IDENTITY_TOKEN};
pub use vertex::{DEFAULT_SERVICE_ACCOUNT, DEFAULT_TOKEN_LIFETIME_SECS};

/// Environment variable [`run`] reads a default [`Behavior`] (JSON) from.
pub const BEHAVIOR_ENV: &str = "SWITCHYARD_MOCK_BEHAVIOR";

/// Run the mock providers on `addr` until ctrl-c (`switchyard mock --listen ADDR`), with
/// the default behavior from [`BEHAVIOR_ENV`] if it is set (e.g.
/// `SWITCHYARD_MOCK_BEHAVIOR='{"tool_loop":{"tool":"Bash","arguments":{"command":"ls"}}}'`);
/// invalid JSON there is an `InvalidInput` error.
pub async fn run(addr: &str) -> std::io::Result<()> {
    let default = env_behavior(std::env::var(BEHAVIOR_ENV).ok().as_deref())?;
    run_with_default(addr, default).await
}

/// The default behavior held by [`BEHAVIOR_ENV`]'s value (unset or blank: none).
fn env_behavior(value: Option<&str>) -> std::io::Result<Option<Behavior>> {
    match value {
        Some(json) if !json.trim().is_empty() => Behavior::from_json(json).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{BEHAVIOR_ENV}: {e}"),
            )
        }),
        _ => Ok(None),
    }
}

/// [`run`] with an explicit default behavior (for a `--behavior JSON` flag).
pub async fn run_with_default(addr: &str, default: Option<Behavior>) -> std::io::Result<()> {
    let server = MockServer::start(addr).await?;
    if let Some(b) = default {
        server.set_default(b);
    }
    let base = server.base_url();
    println!("switchyard mock providers listening on {base}");
    println!(
        "  OpenAI:    POST {base}/v1/chat/completions, {base}/v1/responses, {base}/v1/embeddings"
    );
    println!("  Azure:     POST {base}/openai/deployments/{{deployment}}/chat/completions");
    println!("  Anthropic: POST {base}/v1/messages, {base}/v1/messages/count_tokens");
    println!("  Gemini:    POST {base}/v1beta/models/{{model}}:generateContent");
    println!("             POST {base}/v1beta/models/{{model}}:streamGenerateContent?alt=sse");
    println!("             POST {base}/v1beta/models/{{model}}:embedContent, :batchEmbedContents, :countTokens");
    println!("  Bedrock:   POST {base}/model/{{modelId}}/converse, /converse-stream, /invoke, /invoke-with-response-stream, /count-tokens");
    println!(
        "             (SigV4: AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, us-east-1)"
    );
    println!("  Vertex:    POST {base}/token (service account: fixtures/providers/vertex/oauth/service_account.test.json)");
    println!("             POST {base}/v1/projects/{{p}}/locations/{{l}}/publishers/{{google|anthropic}}/models/{{m}}:{{method}}");
    tokio::signal::ctrl_c().await?;
    server.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn env_behavior() {
        assert_eq!(super::env_behavior(None).unwrap(), None);
        assert_eq!(super::env_behavior(Some(" ")).unwrap(), None);
        let b = super::env_behavior(Some(
            r#"{"tool_loop":{"tool":"Bash","arguments":{"command":"ls"},"final":"ok"}}"#,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            b,
            super::Behavior::tool_loop("Bash", serde_json::json!({"command": "ls"}), "ok")
        );
        let e = super::env_behavior(Some(r#"{"tool_loop":{"toool":1}}"#)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().starts_with("SWITCHYARD_MOCK_BEHAVIOR: "));
    }
}
