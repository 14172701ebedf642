"""The browser dashboard in a real headless chromium (selenium + chromedriver).

A paced loop publishes telemetry and serves the control channel; ``rtctl
dashboard``'s server bridges both to the page. Asserts that the plots receive and
draw data (points drawn, non-blank canvases, histogram bars), that the page was
served from the package (no CDN), that the page's e-stop button trips the
loop's safety monitor with no token, and that its re-arm button, with the control
token typed into the page's password field, is accepted by the control channel
(the token kept out of the URL and the page's storage; the dashboard holds none). Screenshots are saved in
the test's tmp directory.
Skipped, with the reason, when chromium or chromedriver is not installed.
"""
import shutil
import threading
import urllib.request

import pytest

from rtctl.operator.auth import TOKEN_ENV
from rtctl.operator.dashboard import Dashboard, wait_for
from telemetry_helpers import make_loop

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="Debian's chromium and chromium-driver are not installed (.ci/run installs them when run as root)")


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--disable-background-timer-throttling"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.mark.slow
def test_dashboard_plots_live_data_and_its_estop_trips_the_loop(tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv(TOKEN_ENV, "browser-test-control-token")
    browser = _browser()
    loop = make_loop(loop={"pace": True, "rate_hz": 500.0},
                     trajectory={"type": "sinusoid", "center": [0.0] * 7, "amplitude": [0.2] * 7,
                                 "frequency": [1.0] * 7},
                     telemetry={"enabled": True, "endpoint": "tcp://127.0.0.1:0", "meta_period": 0.2},
                     control={"enabled": True, "endpoint": "tcp://127.0.0.1:0"})
    token = getattr(loop.control, "token", None) or "browser-test-control-token"
    dash = Dashboard(loop.telemetry.endpoint, loop.control.endpoint, port=0)
    runner = threading.Thread(target=lambda: loop.run(duration=8.0), daemon=True)
    try:
        url = dash.start()
        runner.start()
        # the page and its plotting library come from the package
        page = urllib.request.urlopen(url, timeout=5).read().decode()
        assert '<script src="plot.js"></script>' in page and "http" not in page.split("<script")[1]
        assert b"TinyPlot" in urllib.request.urlopen(url + "plot.js", timeout=5).read()
        browser.get(url)
        js = "return window.rtctl && window.rtctl.drawn ? [window.rtctl.frames, window.rtctl.drawn] : null;"
        assert wait_for(lambda: (r := browser.execute_script(js)) is not None and r[0] > 20
                        and r[1]["pos"] > 30 and r[1]["err"] > 100 and r[1]["hist"] > 0, timeout=20), \
            browser.execute_script("return window.rtctl")
        ink = browser.execute_script("""
            const out = {};
            for (const id of ['pos', 'err', 'eff', 'hist']) {
              const c = document.getElementById(id), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
              let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) n++;
              out[id] = n; }
            return out;""")
        assert all(v > 2000 for v in ink.values()), ink
        assert browser.find_element(By.ID, "safety").text == "ARMED"
        assert browser.execute_script("return window.rtctl.joints.length") == 7
        browser.save_screenshot(str(tmp_path / "dashboard_live.png"))

        assert not loop.safety.tripped
        browser.find_element(By.ID, "estop").click()
        assert wait_for(lambda: loop.safety.tripped, timeout=5)
        assert loop.safety.trip_reason == "e-stop: dashboard e-stop button"
        assert wait_for(lambda: browser.find_element(By.ID, "safety").text == "SAFE STATE: TRIPPED", timeout=5)
        assert wait_for(lambda: any(e["kind"] == "control" for e in browser.execute_script(
            "return window.rtctl.events")), timeout=5)
        browser.save_screenshot(str(tmp_path / "dashboard_tripped.png"))
        assert (tmp_path / "dashboard_tripped.png").stat().st_size > 10_000

        field = browser.find_element(By.ID, "token")
        assert field.get_attribute("type") == "password"
        field.send_keys(token)
        browser.find_element(By.ID, "rearm").click()
        rearmed = "return window.rtctl.replies.some(r => r.cmd === 'rearm' && r.ok === true)"
        assert wait_for(lambda: browser.execute_script(rearmed), timeout=5), browser.execute_script(
            "return window.rtctl.replies")
        assert browser.execute_script("return localStorage.length + sessionStorage.length") == 0
        assert token not in browser.current_url
        assert token not in browser.execute_script("return JSON.stringify(window.rtctl.replies)")
        browser.save_screenshot(str(tmp_path / "dashboard_rearmed.png"))
        print(f"dashboard screenshots: {tmp_path}")
    finally:
        browser.quit()
        dash.stop()
        runner.join(15)
        loop.control.close()
        loop.telemetry.close()
