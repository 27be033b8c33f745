"""The OpenAI-compatible chat client against the local stub endpoint."""

import base64
import json
import urllib.request

import pytest

from icml25.core.chat import (
    ChatClient,
    ChatError,
    image_part,
    stub_requests,
    stub_server,
    text_part,
)


def test_complete_returns_the_reply_and_sends_the_standard_body():
    with stub_server(lambda body: "move: " + body["messages"][-1]["content"]) as url:
        client = ChatClient(url, "tiny", api_key="k", timeout_s=5, backoff_s=0)
        reply = client.complete([{"role": "user", "content": "left"}], temperature=0.0)
        sent = stub_requests(url)
    assert reply == "move: left"
    assert sent == [{"model": "tiny", "messages": [{"role": "user", "content": "left"}],
                     "temperature": 0.0}]


def test_garbage_and_server_errors_are_retried_then_raised_with_the_attempt_count():
    with stub_server(lambda body: None) as url:
        client = ChatClient(url, "m", timeout_s=5, max_retries=2, backoff_s=0)
        with pytest.raises(ChatError, match="after 3 attempts") as info:
            client.complete([{"role": "user", "content": "x"}])
        assert len(stub_requests(url)) == 3
    assert info.value.attempts == 3 and client.failures == 1

    def boom(body):
        raise RuntimeError("overloaded")

    with stub_server(boom) as url, pytest.raises(ChatError, match="HTTP Error 500"):
        ChatClient(url, "m", timeout_s=5, max_retries=1, backoff_s=0).complete(
            [{"role": "user", "content": "x"}])


def test_a_hung_endpoint_times_out_within_the_bounded_attempts():
    with stub_server(lambda body: "late", delay_s=1.0) as url:
        client = ChatClient(url, "m", timeout_s=0.2, max_retries=1, backoff_s=0)
        with pytest.raises(ChatError, match="after 2 attempts"):
            client.complete([{"role": "user", "content": "x"}])


def test_a_transient_failure_is_recovered_by_a_retry():
    calls = []

    def flaky(body):
        calls.append(1)
        return None if len(calls) == 1 else "ok"

    with stub_server(flaky) as url:
        assert ChatClient(url, "m", timeout_s=5, backoff_s=0).complete(
            [{"role": "user", "content": "x"}]) == "ok"
    assert len(calls) == 2


def test_image_parts_are_inline_data_urls():
    part = image_part(b"\x89PNG fake")
    assert part["type"] == "image_url"
    prefix, data = part["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/png;base64" and base64.b64decode(data) == b"\x89PNG fake"
    with stub_server(lambda body: json.dumps(body["messages"][0]["content"][0])) as url:
        reply = ChatClient(url, "m", timeout_s=5).complete(
            [{"role": "user", "content": [text_part("what is this?"), part]}])
    assert json.loads(reply) == {"type": "text", "text": "what is this?"}
    with pytest.raises(ValueError, match="empty"):
        image_part(b"")


def test_bad_configuration_is_refused_by_name():
    with pytest.raises(ValueError, match="base_url"):
        ChatClient("localhost:8000", "m")
    with pytest.raises(ValueError, match="timeout_s"):
        ChatClient("http://x", "m", timeout_s=0)
    with pytest.raises(ValueError, match="lack model"):
        ChatClient.from_credentials({"base_url": "http://x"})
    client = ChatClient.from_credentials({"base_url": "http://x/", "model": "m"}, max_retries=0)
    assert client.base_url == "http://x" and client.max_retries == 0


def test_the_stub_answers_404_off_the_chat_route():
    with stub_server(lambda body: "x") as url:
        request = urllib.request.Request(url + "/models", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(request, timeout=5)
