"""The browser verifier (web/, docs/BROWSER.md) in a real headless Chromium,
driven through WebDriver (selenium + Debian's chromedriver). Run by
scripts/browser-test.sh, which builds everything and starts `detllm serve`.

Scenarios, each ending in a screenshot of the verdict and a check of its text:
  verified    a real SmolLM2 transcript (>= 16 generated tokens) verifies, and
              the page's digest equals the one the native `detllm verify` printed;
  edited      the same transcript with one token edited: that step, the recorded
              (edited) and the recomputed (original) token are shown;
  other-model a transcript of another model is refused by the SHA-256 check;
  server      an answer of `detllm serve` fetched by its transcript id verifies,
              and its Ed25519 receipt checks against the server's public key;
  receipt     the same answer against another key: WRONG KEY; with one
              signature byte changed: BAD SIGNATURE;
  file        a file:// copy of the page verifies the same transcript.

Usage: browser_test.py SERVER_URL MODEL TRANSCRIPT OTHER_TRANSCRIPT NATIVE_DIGEST OUT_DIR PUBLIC_KEY
"""

import json
import os
import shutil
import sys
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

TIMEOUT = 300  # seconds for one verification (the build is not counted)


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1150",
              "--allow-file-access-from-files"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def verify(d, url, model, transcript=None, transcript_id=None, key=None):
    """Opens the page, gives it the files (and the signer's public key), runs it; the verdict element."""
    d.get(url)
    d.find_element(By.ID, "model").send_keys(model)
    if key:
        d.find_element(By.ID, "public-key").send_keys(key)
    if transcript:
        d.find_element(By.ID, "transcript-file").send_keys(transcript)
        WebDriverWait(d, 30).until(lambda d: d.find_element(By.ID, "transcript").get_attribute("value"))
    if transcript_id:
        d.find_element(By.ID, "transcript-id").send_keys(transcript_id)
        d.find_element(By.ID, "fetch").click()
        WebDriverWait(d, 30).until(lambda d: "fetched" in d.find_element(By.ID, "status").text)
    d.find_element(By.ID, "verify").click()
    WebDriverWait(d, TIMEOUT).until(lambda d: d.find_element(By.ID, "verdict").get_attribute("class")
                                    and not d.find_element(By.ID, "verify").get_attribute("disabled"))
    return d.find_element(By.ID, "verdict")


def shot(d, verdict, out, name):
    """A screenshot of the page at its verdict; its path."""
    d.execute_script("arguments[0].scrollIntoView()", verdict)
    path = os.path.join(out, f"{name}.png")
    d.save_screenshot(path)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return path


def expect(verdict, cls, *texts):
    got_cls, text = verdict.get_attribute("class"), verdict.text
    assert got_cls == cls, f"verdict {got_cls!r}, expected {cls!r}:\n{text}"
    for t in texts:
        assert t in text, f"verdict lacks {t!r}:\n{text}"
    return text


def main():
    server, native_digest, public_key = sys.argv[1], sys.argv[5], sys.argv[7]
    model, transcript, other, out = (os.path.abspath(p) for p in (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[6]))
    t = json.load(open(transcript))
    steps = t["steps"]
    assert len(steps) >= 16, f"the transcript has {len(steps)} steps, the test needs >= 16"
    page = server.rstrip("/") + "/verify/"
    d = browser()
    try:
        # 1. verified, with the native digest
        v = verify(d, page, model, transcript=transcript)
        text = expect(v, "verified", "verified", f"All {len(steps)} steps", t["final_digest"], "profile detllm-v1")
        assert native_digest in text, f"the native digest {native_digest} is not the page's:\n{text}"
        rate = d.find_element(By.ID, "status").get_attribute("data-tokens-per-second")
        print(f"verified: {len(steps)} steps, digest {t['final_digest']} (= native), {rate} tokens/s in the browser")
        print("screenshot", shot(d, v, out, "verified"))

        # 2. one token edited
        k = len(steps) // 2
        orig = steps[k]["id"]
        edited = json.loads(json.dumps(t))
        edited["steps"][k]["id"] = orig + 1
        path = os.path.join(out, "edited.json")
        json.dump(edited, open(path, "w"), indent=2)
        v = verify(d, page, model, transcript=path)
        expect(v, "diverged", f"diverged at step {k}", f"recorded token {orig + 1} ", f"recomputed token {orig} ")
        print(f"edited: step {k} reported, recorded {orig + 1}, recomputed {orig}")
        print("screenshot", shot(d, v, out, "edited"))

        # 3. another model's transcript
        v = verify(d, page, model, transcript=other)
        expect(v, "wrong-model", "wrong model", json.load(open(other))["model"]["sha256"], "Nothing was run")
        print("other-model: refused by the SHA-256 check")
        print("screenshot", shot(d, v, out, "other-model"))

        # 4. an answer of the server, fetched by its transcript id
        req = {"messages": [{"role": "user", "content": "Name three colours of the rainbow."}],
               "max_tokens": 20, "seed": 5}
        r = urllib.request.urlopen(urllib.request.Request(
            server.rstrip("/") + "/v1/chat/completions", json.dumps(req).encode(),
            {"Content-Type": "application/json"}), timeout=120)
        answer = json.load(r)
        choice = answer["choices"][0]["detllm"]
        tid = choice["transcript_id"]
        v = verify(d, page, model, transcript_id=tid, key=public_key)
        expect(v, "verified", "verified", choice["audit_digest"], "signature valid", public_key)
        print(f"server: answer {answer['id']} fetched by transcript id and verified, receipt signed by {public_key}")
        print("screenshot", shot(d, v, out, "server"))

        # 4b. the receipt against another key, and with its signature edited
        signed = json.load(urllib.request.urlopen(server.rstrip("/") + f"/v1/transcripts/{tid}", timeout=60))
        path = os.path.join(out, "signed.json")
        json.dump(signed, open(path, "w"), indent=2)
        v = verify(d, page, model, transcript=path, key="00" * 32)
        expect(v, "verified", "WRONG KEY")
        sig = signed["receipt"]["signature"]
        signed["receipt"]["signature"] = ("0" if sig[0] != "0" else "1") + sig[1:]
        json.dump(signed, open(path, "w"), indent=2)
        v = verify(d, page, model, transcript=path, key=public_key)
        expect(v, "verified", "BAD SIGNATURE")
        print("receipt: another key -> WRONG KEY; an edited signature -> BAD SIGNATURE")
        print("screenshot", shot(d, v, out, "bad-signature"))

        # 5. a file:// copy of the page
        copy = os.path.join(out, "page")
        os.makedirs(copy, exist_ok=True)
        for f in ("index.html", "job.js", "verifier.js", "wasm.js"):
            shutil.copy(os.path.join("web", f), copy)
        v = verify(d, "file://" + os.path.abspath(os.path.join(copy, "index.html")), model, transcript=transcript)
        expect(v, "verified", "verified", t["final_digest"])
        print("file: a file:// copy verifies")
        print("screenshot", shot(d, v, out, "file"))
    finally:
        d.quit()
    print("browser test: all verdicts as expected")


if __name__ == "__main__":
    main()
