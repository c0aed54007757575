// Onyxia's chat page: talks to this server's OpenAI-compatible API and nothing else.
// Each turn POSTs the whole conversation to /v1/chat/completions with stream:true and reads the
// server-sent events as they arrive, appending choices[0].delta.content; the speed figures come
// from the arrival times (and from `usage`, which stream_options.include_usage asks for).
"use strict";

// Relative URLs, so the page also works when a proxy serves the API under a path prefix.
const API = { models: "v1/models", chat: "v1/chat/completions" };
const KEY_STORAGE = "onyxia.apiKey";

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $("messages"), empty: $("empty"), composer: $("composer"), prompt: $("prompt"),
  send: $("send"), stop: $("stop"), model: $("model"), newChat: $("new-chat"),
  temperature: $("temperature"), maxTokens: $("max-tokens"), apiKey: $("api-key"),
};

// history: the finished turns, sent again with every request (the server is stateless per request);
// conversation: bumped by "New chat", so an answer still streaming from before is not kept.
const state = { history: [], conversation: 0, model: null, controller: null };

// ----- requests -----------------------------------------------------------------------------------
function requestHeaders() {
  const headers = { "Content-Type": "application/json" };
  const key = ui.apiKey.value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

// The optional settings, only those the user filled in: an empty field leaves the server's default.
function samplingSettings() {
  const settings = {};
  const temperature = parseFloat(ui.temperature.value);
  if (Number.isFinite(temperature)) settings.temperature = temperature;
  const maxTokens = parseInt(ui.maxTokens.value, 10);
  if (Number.isInteger(maxTokens) && maxTokens > 0) settings.max_tokens = maxTokens;
  return settings;
}

// A failed response's message: the OpenAI-style {"error": {"message"}} body when there is one.
async function errorMessage(response) {
  const text = await response.text();
  let detail = text;
  try {
    const body = JSON.parse(text);
    const error = body.error ?? body.detail ?? body;
    detail = typeof error === "string" ? error : error.message ?? JSON.stringify(error);
  } catch {
    // not JSON: show the raw text
  }
  return `${response.status} ${response.statusText}: ${detail}`.trim();
}

async function loadModel() {
  try {
    const response = await fetch(API.models, { headers: requestHeaders() });
    if (!response.ok) throw new Error(await errorMessage(response));
    const body = await response.json();
    state.model = body.data?.[0]?.id ?? null;
    ui.model.textContent = state.model ?? "no model";
    ui.model.title = "model served at /v1/models";
  } catch (error) {
    state.model = null;
    ui.model.textContent = "model unavailable";
    ui.model.title = error.message;
  }
  ui.model.dataset.state = state.model ? "ready" : "error";
}

// Yields the data of each server-sent event as soon as its closing blank line arrives; network
// chunks may end mid-line, so lines are cut from a buffer. Leaving the loop early closes the stream.
async function* serverSentData(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).replace(/\r$/, "");
        buffer = buffer.slice(end + 1);
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
    if (data.length) yield data.join("\n");
  } finally {
    reader.cancel().catch(() => {});
  }
}

// ----- rendering ----------------------------------------------------------------------------------
function element(tag, className, testid, text = "") {
  const node = document.createElement(tag);
  node.className = className;
  node.dataset.testid = testid;
  node.textContent = text;
  return node;
}

function scrollToEnd() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function addUserMessage(text) {
  ui.empty.hidden = true;
  const box = element("div", "message user", "user-message");
  box.append(element("div", "content", "content", text));
  ui.messages.append(box);
  scrollToEnd();
  return box;
}

// An assistant bubble: the streamed text, the speed line, and an error line when the turn fails.
function addAssistantMessage() {
  const box = element("div", "message assistant", "assistant-message");
  box.dataset.state = "streaming";
  const view = {
    box,
    content: element("div", "content", "answer"),
    stats: element("div", "stats", "stats"),
  };
  box.append(view.content, view.stats);
  ui.messages.append(box);
  scrollToEnd();
  return view;
}

function showError(view, message) {
  view.box.append(element("div", "error", "error", message));
  scrollToEnd();
}

// tokens: `usage.completion_tokens` when the server sent it, else the chunks that carried text.
// tok/s is the decode rate: tokens after the first over the time after the first arrived.
function speed(timing) {
  const tokens = timing.usage?.completion_tokens ?? timing.chunks;
  const ttft = timing.first === null ? null : timing.first - timing.start;
  const end = timing.end ?? performance.now();
  let rate = null;
  if (tokens > 1 && timing.first !== null && end > timing.first) rate = ((tokens - 1) * 1000) / (end - timing.first);
  else if (tokens > 0 && end > timing.start) rate = (tokens * 1000) / (end - timing.start);
  return { tokens, ttft, rate };
}

function showStats(view, timing, outcome = "") {
  const { tokens, ttft, rate } = speed(timing);
  const parts = [`${tokens} token${tokens === 1 ? "" : "s"}`];
  if (rate !== null) parts.push(`${rate.toFixed(1)} tok/s`);
  if (ttft !== null) parts.push(`first token ${Math.round(ttft)} ms`);
  if (outcome === "stopped") parts.push("stopped");
  view.stats.textContent = parts.join(" · ");
  Object.assign(view.stats.dataset, {
    tokens: String(tokens),
    tokensPerSecond: rate === null ? "" : rate.toFixed(3),
    ttftMs: ttft === null ? "" : ttft.toFixed(1),
  });
}

function setBusy(busy) {
  ui.send.disabled = busy;
  ui.stop.hidden = !busy;
  document.body.dataset.busy = String(busy);
}

// ----- one turn -----------------------------------------------------------------------------------
async function sendTurn(text) {
  const conversation = state.conversation;
  const messages = [...state.history, { role: "user", content: text }];
  const question = addUserMessage(text);
  const view = addAssistantMessage();
  const body = {
    model: state.model ?? "onyxia",
    messages,
    stream: true,
    stream_options: { include_usage: true },
    ...samplingSettings(),
  };
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  const timing = { start: performance.now(), first: null, end: null, chunks: 0, usage: null };
  let answer = "";
  let outcome = "done";
  try {
    const init = { method: "POST", headers: requestHeaders(), body: JSON.stringify(body), signal: controller.signal };
    const response = await fetch(API.chat, init);
    if (!response.ok) throw new Error(await errorMessage(response));
    let finished = false;
    for await (const data of serverSentData(response)) {
      if (data === "[DONE]") {
        finished = true;
        break;
      }
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message ?? JSON.stringify(chunk.error));
      if (chunk.usage) timing.usage = chunk.usage;
      const delta = chunk.choices?.[0]?.delta?.content;
      if (delta) {
        timing.first ??= performance.now();
        timing.chunks += 1;
        answer += delta;
        view.content.append(delta);
        scrollToEnd();
      }
      const reason = chunk.choices?.[0]?.finish_reason;
      if (reason) view.box.dataset.finishReason = reason;
      showStats(view, timing);
    }
    if (!finished) throw new Error("the stream ended before data: [DONE]");
  } catch (error) {
    outcome = error.name === "AbortError" ? "stopped" : "error";
    if (outcome === "error") showError(view, error.message);
  } finally {
    timing.end = performance.now();
    if (outcome === "error" && timing.chunks === 0) view.stats.remove();
    else showStats(view, timing, outcome);
    view.box.dataset.state = outcome;
    if (state.controller === controller) state.controller = null;
    setBusy(state.controller !== null);
  }
  // A stopped answer stays in the conversation as far as it got; a turn that failed or was stopped
  // before any text is not sent again, and its question is dimmed to show that.
  if (conversation !== state.conversation) return;
  if (outcome !== "error" && answer) state.history = [...messages, { role: "assistant", content: answer }];
  else {
    question.dataset.inHistory = "false";
    question.title = "not part of the conversation: it got no answer";
  }
}

// ----- wiring -------------------------------------------------------------------------------------
ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || state.controller) return;
  ui.prompt.value = "";
  sendTurn(text);
});

ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.stop.addEventListener("click", () => state.controller?.abort());

ui.newChat.addEventListener("click", () => {
  state.controller?.abort();
  state.conversation += 1;
  state.history = [];
  ui.messages.querySelectorAll(".message").forEach((node) => node.remove());
  ui.empty.hidden = false;
  ui.prompt.focus();
});

ui.apiKey.value = localStorage.getItem(KEY_STORAGE) ?? "";
ui.apiKey.addEventListener("change", () => {
  const key = ui.apiKey.value.trim();
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
  loadModel();
});

setBusy(false);
loadModel();
ui.prompt.focus();
