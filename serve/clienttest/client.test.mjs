// Drives a running gozoo serve with the official openai npm client: the
// server's Go test (serve's TestOpenAINodeClient) starts it on the
// qwen3-tiny test model, with a stand-in grammar behind the
// constrained-decoding seam that writes a fixed tool call or JSON, and
// passes its address in OPENAI_BASE_URL.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.OPENAI_BASE_URL;
const apiKey = process.env.OPENAI_API_KEY;
const model = process.env.GOZOO_MODEL;
if (!baseURL || !apiKey || !model) {
  throw new Error("run through serve's TestOpenAINodeClient: OPENAI_BASE_URL, OPENAI_API_KEY and GOZOO_MODEL are unset");
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "What is Go?" },
];
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

async function greedy(content, maxTokens) {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content }],
    max_tokens: maxTokens,
    temperature: 0,
  });
  return r.choices[0].message.content;
}

test("models", async () => {
  const list = [];
  for await (const m of client.models.list()) list.push(m.id);
  assert.deepEqual(list, [model]);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
});

test("chat", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 6, temperature: 0, user: "u1", store: false });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 6);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 6);
});

test("streaming equals the whole answer", async () => {
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, "length");
  assert.deepEqual(usage, whole.usage);
  // The stream helper puts the chunks back together.
  const helper = client.chat.completions.stream({ model, messages, max_tokens: 8, temperature: 0 });
  const final = await helper.finalChatCompletion();
  assert.equal(final.choices[0].message.content, whole.choices[0].message.content);
});

test("n choices, usage summed", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 4, n: 3, temperature: 1, seed: 7 });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 12);
  const one = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 1, seed: 9 });
  assert.equal(one.choices[0].message.content, r.choices[2].message.content);
});

test("logprobs", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 5);
  let bytes = [];
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.ok(t.top_logprobs[0].logprob >= t.logprob - 1e-9);
    bytes = bytes.concat(t.bytes);
  }
  assert.equal(Buffer.from(bytes).toString("utf8"), r.choices[0].message.content);
});

test("tools: a call, whole and streamed", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required", max_tokens: 60,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });

  const stream = client.chat.completions.stream({
    model, messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required", max_tokens: 60,
  });
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  assert.equal(final.choices[0].message.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), { city: "Paris" });

  // The answer goes back with the tool's result: content null renders as "".
  const next = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Weather in Paris?" }, c.message, { role: "tool", tool_call_id: call.id, content: "sunny" }],
    tools, max_tokens: 3, temperature: 0,
  });
  assert.equal(next.choices[0].message.role, "assistant");
});

test("json_schema", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Answer in JSON." }], max_tokens: 40,
    response_format: {
      type: "json_schema",
      json_schema: { name: "answer", strict: true, schema: { type: "object", properties: { answer: { type: "integer" } }, required: ["answer"] } },
    },
  });
  assert.deepEqual(JSON.parse(r.choices[0].message.content), { answer: 42 });
});

test("concurrent clients get their answers alone", async () => {
  const questions = ["What is Go?", "Name a prime.", "Why is the sky blue?", "Hello", "2+2?", "A haiku, please."];
  const alone = [];
  for (const q of questions) alone.push(await greedy(q, 6));
  const together = await Promise.all(questions.map((q) => greedy(q, 6)));
  assert.deepEqual(together, alone);
});

test("abort", async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages, max_tokens: 400, stream: true, logit_bias: { "151645": -100, "151643": -100 } },
    { signal: controller.signal },
  );
  let n = 0;
  // openai-node ends a stream's iteration quietly when its request is
  // aborted.
  for await (const _ of stream) {
    if (++n === 3) controller.abort();
  }
  assert.ok(n >= 3 && n < 20, `${n} chunks read`);
  // The server frees the sequence and goes on answering.
  for (let i = 0; i < 200; i++) {
    const metrics = await (await fetch(baseURL.replace(/\/v1$/, "/metrics"))).text();
    if (/^gozoo_sequences_running 0$/m.test(metrics) && /^gozoo_kv_pool_bytes\{state="in_use"\} 0$/m.test(metrics)) break;
    assert.ok(i < 199, "the aborted sequence still runs");
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.equal(typeof (await greedy("Still there?", 2)), "string");
});

test("errors", async () => {
  await assert.rejects(client.chat.completions.create({ model: "gpt-4o", messages }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, "model_not_found");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, "messages");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages, temperature: "hot" }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, "temperature");
    return true;
  });
  const wrong = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
});

test("429 with retry-after, and the client's retry", async () => {
  // A second server, GOZOO_BUSY_URL, holds one sequence and queues none.
  const busyURL = process.env.GOZOO_BUSY_URL;
  const holder = new AbortController();
  const busy = new OpenAI({ baseURL: busyURL, apiKey, maxRetries: 0 });
  const hold = await busy.chat.completions.create(
    { model, messages, max_tokens: 400, stream: true, logit_bias: { "151645": -100, "151643": -100 } },
    { signal: holder.signal },
  );
  const once = new OpenAI({ baseURL: busyURL, apiKey, maxRetries: 0 });
  await assert.rejects(once.chat.completions.create({ model, messages, max_tokens: 1 }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError);
    assert.equal(e.headers.get("retry-after"), "1");
    return true;
  });
  let refused = 0;
  const retrying = new OpenAI({
    baseURL: busyURL, apiKey, maxRetries: 2,
    fetch: async (url, init) => {
      const r = await fetch(url, init);
      if (r.status === 429) {
        refused++;
        holder.abort(); // the slot frees before the retry
      }
      return r;
    },
  });
  const r = await retrying.chat.completions.create({ model, messages, max_tokens: 1 });
  assert.equal(refused, 1);
  assert.equal(r.choices.length, 1);
  for await (const _ of hold) {
  }
});

test("embeddings, base64 by default and float", async () => {
  const b = await client.embeddings.create({ model, input: ["In the beginning", "hello"] });
  assert.equal(b.data.length, 2);
  assert.equal(b.data[0].embedding.length, 32);
  const f = await client.embeddings.create({ model, input: "In the beginning", encoding_format: "float" });
  assert.equal(f.data[0].embedding.length, 32);
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(f.data[0].embedding[i] - b.data[0].embedding[i]) < 1e-6);
  const norm = Math.hypot(...f.data[0].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-4);
});

test("completions", async () => {
  const r = await client.completions.create({ model, prompt: "In the beginning", max_tokens: 5, temperature: 0, logprobs: 2 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].logprobs.tokens.length, 5);
  assert.equal(r.usage.completion_tokens, 5);
  const s = await client.completions.create({ model, prompt: "In the beginning", max_tokens: 5, temperature: 0, stream: true });
  let text = "";
  for await (const c of s) text += c.choices[0]?.text ?? "";
  assert.equal(text, r.choices[0].text);
});
