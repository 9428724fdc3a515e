"""Re-create the demo cassette shipped in reel_bindings/demo/demo.jsonl.

It records, with the official SDKs through Reel's in-process transports,
OpenAI, Anthropic and Gemini calls (stream and not) against the fake
upstream of Reel's own tests -- so the demo holds no real traffic and no
key.  Run from the project root: ``python scripts/make_demo.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reel_bindings.sdk import anthropic_client, genai_client, openai_client  # noqa: E402
from tests.fakes.upstream import FRAME_DELAY_HEADER, FakeUpstreamThread  # noqa: E402

DEMO = ROOT / "src" / "reel_bindings" / "demo" / "demo.jsonl"
PROMPT = "Say hello to Reel."
#: Frames 40 ms apart, so a replay visibly streams.
SLOW = {FRAME_DELAY_HEADER: "40"}


def main() -> None:
    DEMO.unlink(missing_ok=True)
    with FakeUpstreamThread() as fake:
        oa = openai_client(DEMO, mode="auto", api_key="sk-demo", base_url=fake.url + "/v1")
        messages = [{"role": "user", "content": PROMPT}]
        oa.chat.completions.create(model="gpt-4o-mini", messages=messages)
        for _ in oa.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, extra_headers=SLOW
        ):
            pass
        oa.responses.create(model="gpt-4o-mini", input=PROMPT)

        an = anthropic_client(DEMO, mode="auto", api_key="sk-ant-demo", base_url=fake.url)
        an.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=messages)
        with an.messages.stream(
            model="claude-sonnet-4-6", max_tokens=256, messages=messages, extra_headers=SLOW
        ) as stream:
            for _ in stream.text_stream:
                pass

        ge = genai_client(DEMO, mode="auto", api_key="AIza-demo", base_url=fake.url)
        ge.models.generate_content(model="gemini-2.5-flash", contents=PROMPT)
        for _ in ge.models.generate_content_stream(
            model="gemini-2.5-flash",
            contents=PROMPT,
            config={"http_options": {"headers": SLOW}},
        ):
            pass
    lines = DEMO.read_bytes().count(b"\n") - 1
    print(f"wrote {DEMO.relative_to(ROOT)}: {lines} interactions")


if __name__ == "__main__":
    main()
