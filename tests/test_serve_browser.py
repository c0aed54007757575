"""`onyxia serve`'s chat page in a real browser: Debian's Chromium driven by Playwright.

The server is the real app (`create_app()` on the built-in demo model) under uvicorn on 127.0.0.1, on
a socket bound to a free port before the server starts, in a thread the fixture always stops. The
browser opens `/`, sends turns at temperature 0 and reads the streamed answers; the oracle for each
is the API itself, asked (not streamed) with the very request the page sent, so the tests prove the
page's SSE parsing, its history, its settings and its API key, not a hard-coded text. Playwright's
own browser downloads are never used: `.ci/setup` installs Debian's chromium with apt.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, Request, expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STARTUP_S = 300.0  # loading the demo model and building its GPU pipelines on lavapipe
ANSWER_MS = 240_000  # one streamed answer, first request included
MAX_TOKENS = 12
API_KEY = "test-key-0123"
FINISHED = re.compile(r"^(done|stopped|error)$")  # an assistant bubble's data-state once its stream ended


@contextlib.contextmanager
def _serving(**options: Any) -> Iterator[str]:
    """The real app under uvicorn in a thread; its socket is bound first, so the port cannot be taken."""
    import uvicorn

    from onyxia.cli.serve.app import create_app

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(**options), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(url, server, thread)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop within 60 s"


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with _serving() as url:
        yield url


@pytest.fixture(scope="module")
def keyed_server_url() -> Iterator[str]:
    with _serving(api_key=API_KEY) as url:
        yield url


def _wait_until_healthy(url: str, server: Any, thread: threading.Thread) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if not thread.is_alive():
            pytest.fail("the uvicorn thread died during startup (see the captured log)")
        if server.started:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    pytest.fail(f"the server at {url} was not healthy within {STARTUP_S:.0f} s")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"Debian's chromium is missing ({CHROMIUM} does not exist): run .ci/setup, which installs it "
            "with apt (Playwright's own browser download is not used)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def _chat_page(browser: Browser, url: str) -> Iterator[Page]:
    """The chat page in a fresh context (its own localStorage); fails on any uncaught JavaScript error
    and on any request that leaves this server (the page must work offline: no CDN, no web fonts)."""
    context = browser.new_context(viewport={"width": 960, "height": 720})
    errors: list[str] = []
    elsewhere: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda r: None if r.url.startswith((f"{url}/", "data:")) else elsewhere.append(r.url))
        page.goto(f"{url}/")
        yield page
    finally:
        context.close()
    assert errors == [], f"JavaScript errors on the chat page: {errors}"
    assert elsewhere == [], f"the chat page fetched from outside the server: {elsewhere}"


def _settings(page: Page, **fields: str) -> None:
    """Fill settings fields by test id in the collapsible panel (Tab commits each, as a person would)."""
    page.get_by_test_id("settings").locator("summary").click()
    for testid, value in fields.items():
        page.get_by_test_id(testid.replace("_", "-")).fill(value)
        page.get_by_test_id(testid.replace("_", "-")).press("Tab")
    page.get_by_test_id("settings").locator("summary").click()


def _send_turn(page: Page, text: str, turn: int) -> tuple[Request, Locator]:
    """Type `text`, press Enter, and wait for answer number `turn` to end; the request sent and its bubble."""
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/v1/chat/completions")) as sent:
        page.get_by_test_id("prompt").fill(text)
        page.get_by_test_id("prompt").press("Enter")
    bubble = page.get_by_test_id("assistant-message").nth(turn)
    expect(bubble).to_have_attribute("data-state", FINISHED, timeout=ANSWER_MS)
    return sent.value, bubble


def _body(request: Request) -> dict[str, Any]:
    body = request.post_data_json
    assert isinstance(body, dict), f"the page sent {request.post_data!r}"
    return body


def _api_answer(url: str, request: Request) -> dict[str, Any]:
    """The page's request again, not streamed, with the same headers' key: the oracle for the page."""
    plain = {k: v for k, v in _body(request).items() if k not in ("stream", "stream_options")}
    headers = {k: v for k, v in request.all_headers().items() if k == "authorization"}
    response = httpx.post(f"{url}/v1/chat/completions", json=plain, headers=headers, timeout=ANSWER_MS / 1000)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _check_answer(url: str, request: Request, bubble: Locator) -> str:
    """The bubble finished, shows exactly the API's answer for the same request, and its speed figures."""
    expect(bubble).to_have_attribute("data-state", "done")
    shown = bubble.get_by_test_id("answer").text_content()
    expected = _api_answer(url, request)
    assert shown and shown.strip(), "the page shows an empty answer"
    assert shown == expected["choices"][0]["message"]["content"], "the page and the API answer differ"
    stats = bubble.get_by_test_id("stats")
    expect(stats).to_contain_text("tok/s")
    expect(stats).to_contain_text("first token")
    assert stats.get_attribute("data-tokens") == str(expected["usage"]["completion_tokens"])
    assert float(stats.get_attribute("data-tokens-per-second") or "nan") > 0
    assert float(stats.get_attribute("data-ttft-ms") or "nan") > 0
    return shown


def test_chat_page_streams_the_answers_the_api_gives(server_url: str, browser: Browser, tmp_path: Path) -> None:
    models = httpx.get(f"{server_url}/v1/models", timeout=30).json()
    with _chat_page(browser, server_url) as page:
        model = page.get_by_test_id("model-name")
        expect(model).to_have_attribute("data-state", "ready", timeout=30_000)
        expect(model).to_have_text(models["data"][0]["id"])
        _settings(page, temperature="0", max_tokens=str(MAX_TOKENS))

        history: list[dict[str, str]] = []
        for turn, text in enumerate(["Life is", "Tell me more"]):
            request, bubble = _send_turn(page, text, turn)
            body = _body(request)
            history.append({"role": "user", "content": text})
            assert body["messages"] == history, "the page must resend the whole conversation each turn"
            assert body["model"] == models["data"][0]["id"]
            assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
            assert body["temperature"] == 0 and body["max_tokens"] == MAX_TOKENS
            assert "authorization" not in request.all_headers(), "no API key was typed"
            history.append({"role": "assistant", "content": _check_answer(server_url, request, bubble)})

        expect(page.get_by_test_id("error")).to_have_count(0)
        expect(page.get_by_test_id("send")).to_be_enabled()
        expect(page.get_by_test_id("stop")).to_be_hidden()
        screenshot = tmp_path / "chat_page.png"
        page.screenshot(path=str(screenshot), full_page=True)
        assert screenshot.stat().st_size > 0

        page.get_by_test_id("new-chat").click()  # forgets the conversation: the next turn goes alone
        request, bubble = _send_turn(page, "Life is", 0)
        assert _body(request)["messages"] == [{"role": "user", "content": "Life is"}]
        _check_answer(server_url, request, bubble)


def test_chat_page_shows_a_server_error_inline(server_url: str, browser: Browser, tmp_path: Path) -> None:
    """A request the server refuses (a temperature out of range) shows its JSON error message in the page."""
    with _chat_page(browser, server_url) as page:
        expect(page.get_by_test_id("model-name")).to_have_attribute("data-state", "ready", timeout=30_000)
        _settings(page, temperature="-1")
        request, bubble = _send_turn(page, "Life is", 0)
        refused = httpx.post(f"{server_url}/v1/chat/completions", json=_body(request), timeout=30)
        assert refused.status_code == 400, refused.text
        expect(bubble).to_have_attribute("data-state", "error")
        expect(bubble.get_by_test_id("error")).to_contain_text(f"400 Bad Request: {refused.json()['error']['message']}")
        expect(page.get_by_test_id("user-message").nth(0)).to_have_attribute("data-in-history", "false")
        expect(page.get_by_test_id("send")).to_be_enabled()
        page.screenshot(path=str(tmp_path / "chat_page_error.png"))

        _settings(page, temperature="0", max_tokens=str(MAX_TOKENS))  # the refused turn is not sent again
        request, bubble = _send_turn(page, "Life is", 1)
        assert _body(request)["messages"] == [{"role": "user", "content": "Life is"}]
        _check_answer(server_url, request, bubble)


def test_stop_aborts_the_stream_and_the_server_keeps_serving(server_url: str, browser: Browser) -> None:
    """Stop pressed in the same task as Send: the fetch is aborted before any answer can arrive, so the
    bubble ends 'stopped' and empty, the question stays out of the history, and the next turn is right."""
    with _chat_page(browser, server_url) as page:
        expect(page.get_by_test_id("model-name")).to_have_attribute("data-state", "ready", timeout=30_000)
        _settings(page, temperature="0", max_tokens=str(MAX_TOKENS))
        page.get_by_test_id("prompt").fill("Life is")
        page.evaluate(
            "() => { document.getElementById('composer').requestSubmit(); document.getElementById('stop').click(); }"
        )
        stopped = page.get_by_test_id("assistant-message").nth(0)
        expect(stopped).to_have_attribute("data-state", "stopped", timeout=ANSWER_MS)
        expect(stopped.get_by_test_id("answer")).to_have_text("")
        expect(page.get_by_test_id("user-message").nth(0)).to_have_attribute("data-in-history", "false")
        expect(page.get_by_test_id("stop")).to_be_hidden()

        request, bubble = _send_turn(page, "Life is", 1)
        assert _body(request)["messages"] == [{"role": "user", "content": "Life is"}]
        _check_answer(server_url, request, bubble)


def test_api_key_typed_in_the_settings_opens_a_keyed_server(keyed_server_url: str, browser: Browser) -> None:
    """Without the key /v1/models answers 401 and the page says the model is unavailable; the key typed
    in the settings is sent as a Bearer token, kept in localStorage, and still there after a reload."""
    with _chat_page(browser, keyed_server_url) as page:
        model = page.get_by_test_id("model-name")
        expect(model).to_have_attribute("data-state", "error", timeout=30_000)
        assert httpx.get(f"{keyed_server_url}/v1/models", timeout=30).status_code == 401
        _settings(page, api_key=API_KEY, temperature="0", max_tokens=str(MAX_TOKENS))
        expect(model).to_have_attribute("data-state", "ready", timeout=30_000)

        request, bubble = _send_turn(page, "Life is", 0)
        assert request.all_headers().get("authorization") == f"Bearer {API_KEY}"
        _check_answer(keyed_server_url, request, bubble)

        page.reload()
        expect(page.get_by_test_id("api-key")).to_have_value(API_KEY)
        expect(model).to_have_attribute("data-state", "ready", timeout=30_000)
