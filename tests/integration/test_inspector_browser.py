"""The memory inspector in real headless Chromium (Debian's `chromium` and `chromium-driver`,
driven by Selenium): sign in, see only one's own memories, search, delete, forget, and a
second user who sees none of it. Screenshots go to test-output/inspector/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from recall.config import Settings
from recall.store import MemoryStore
from tests.conftest import ROOT, Databases, free_port

pytestmark = [pytest.mark.slow, pytest.mark.model]

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
SHOTS = ROOT / "test-output" / "inspector"
TOKENS = {"alice": "ui-alice", "bob": "ui-bob"}
ALICE = [
    ("I adopted a dog named Max", "Max is a lovely name!"),
    ("I work as a nurse at the city hospital", "That sounds demanding."),
    ("My favourite food is ramen", "Good choice."),
]
BOB = [("I play the cello in an orchestra", "Wonderful!")]

if CHROMIUM is None or DRIVER is None:
    pytest.skip(
        "Chromium not found: `apt-get install chromium chromium-driver` runs the inspector's "
        "browser tests (.ci/run does)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402  # only once Chromium is known to be there
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
async def ui_db(databases: Databases) -> str:
    url = await databases.create("recall_ui")
    async with MemoryStore.connect(Settings(database_url=url)) as store:
        for said, reply in ALICE:
            await store.add_turn("alice", said, reply, conversation_id="t-alice")
        for said, reply in BOB:
            await store.add_turn("bob", said, reply, conversation_id="t-bob")
    return url


@contextmanager
def _serve(ui_db: str, work: Path, **settings: str) -> Iterator[str]:
    """The app (its inspector) on a free port over `ui_db`, with `RECALL_*` `settings` beside
    the test's own; its URL once it answers."""
    port = free_port()
    env = {
        **os.environ,
        "RECALL_DATABASE_URL": ui_db,
        "RECALL_AUTH_TOKENS": ",".join(f"{t}:{u}" for u, t in TOKENS.items()),
        "RECALL_MODEL_CACHE_DIR": str(ROOT / ".recall" / "models"),
        "RECALL_QUEUE_PATH": str(work / "outbox.sqlite3"),
        "HF_HUB_OFFLINE": "1",
        **{f"RECALL_{name.upper()}": value for name, value in settings.items()},
    }
    log = (work / "app.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "recall.server.app:app", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (work / "app.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/recall/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            raise AssertionError((work / "app.log").read_text()[-3000:])
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def app_url(ui_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve(ui_db, tmp_path_factory.mktemp("inspector")) as url:
        yield url


@pytest.fixture(scope="module")
def semantic_url(ui_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app again with RECALL_MODE=semantic (issue 48: the page follows the server)."""
    with _serve(ui_db, tmp_path_factory.mktemp("semantic"), mode="semantic") as url:
        yield url


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1100,1400")
    driver = webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=options)
    driver.implicitly_wait(0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: WebDriver, seconds: float = 20) -> WebDriverWait[WebDriver]:
    return WebDriverWait(driver, seconds)


def _memories(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, '[data-testid="memory"]')


def _texts(driver: WebDriver) -> list[str]:
    return [m.text for m in _memories(driver)]


def _sign_in(driver: WebDriver, url: str, token: str, expected: int) -> None:
    driver.get(f"{url}/recall/ui")
    driver.find_element(By.CSS_SELECTOR, '[data-testid="token"]').send_keys(token)
    driver.find_element(By.CSS_SELECTOR, '[data-testid="login"]').click()
    _wait(driver).until(lambda d: len(_memories(d)) == expected)


def test_a_user_sees_searches_deletes_and_erases_their_memories(
    app_url: str, browser: WebDriver
) -> None:
    _sign_in(browser, app_url, TOKENS["alice"], expected=len(ALICE))
    assert "token" not in browser.current_url and TOKENS["alice"] not in browser.current_url
    texts = _texts(browser)
    assert "My favourite food is ramen" in texts[0]  # newest first
    assert all("cello" not in t for t in texts)
    browser.save_screenshot(str(SHOTS / "1-signed-in.png"))

    search = browser.find_element(By.CSS_SELECTOR, '[data-testid="search"]')
    search.send_keys("What is my dog called?", Keys.ENTER)
    _wait(browser).until(lambda d: "found for" in d.find_element(By.ID, "status").text)
    found = _memories(browser)
    assert "Max" in found[0].text and "score" in found[0].text
    # why, in the words the store wrote (issue 39): the same sentences as `recall search --explain`
    why = found[0].find_element(By.CSS_SELECTOR, '[data-testid="why"]')
    why.find_element(By.TAG_NAME, "summary").click()
    _wait(browser).until(lambda d: "of the message's" in why.text)
    assert "In meaning it is" in why.text and "It was said" in why.text
    browser.save_screenshot(str(SHOTS / "2-search.png"))

    found[0].find_element(By.CSS_SELECTOR, '[data-testid="delete"]').click()
    _wait(browser).until(lambda d: d.find_element(By.ID, "status").text == "Deleted.")
    assert all("Max" not in t for t in _texts(browser))
    browser.find_element(By.ID, "clear-search").click()
    _wait(browser).until(lambda d: len(_memories(d)) == len(ALICE) - 1)
    assert all("Max" not in t for t in _texts(browser))  # gone from the database too

    browser.find_element(By.CSS_SELECTOR, '[data-testid="forget"]').click()
    _wait(browser).until(expected_conditions.alert_is_present())
    browser.switch_to.alert.accept()
    _wait(browser).until(lambda d: "Erased 2 memories" in d.find_element(By.ID, "status").text)
    assert _memories(browser) == []
    browser.save_screenshot(str(SHOTS / "3-forgotten.png"))
    browser.refresh()  # signed in still (this tab's session), and nothing comes back
    _wait(browser).until(lambda d: "remembers nothing" in d.find_element(By.ID, "status").text)
    assert _memories(browser) == []


def test_another_user_sees_only_their_own(app_url: str, browser: WebDriver) -> None:
    _sign_in(browser, app_url, TOKENS["bob"], expected=len(BOB))
    assert "cello" in _texts(browser)[0]
    search = browser.find_element(By.CSS_SELECTOR, '[data-testid="search"]')
    search.send_keys("dog Max ramen nurse", Keys.ENTER)
    _wait(browser).until(lambda d: "found for" in d.find_element(By.ID, "status").text)
    assert all("cello" in t for t in _texts(browser))  # only his own, however he asks
    assert browser.find_element(By.ID, "chart").find_elements(By.CSS_SELECTOR, "rect")
    browser.save_screenshot(str(SHOTS / "4-second-user.png"))


def test_a_wrong_token_is_refused_on_the_page(app_url: str, browser: WebDriver) -> None:
    browser.get(f"{app_url}/recall/ui")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="token"]').send_keys("not-a-token")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="login"]').click()
    _wait(browser).until(lambda d: d.find_element(By.ID, "signin-error").text)
    assert "not accepted" in browser.find_element(By.ID, "signin-error").text
    assert not browser.find_element(By.ID, "inspector").is_displayed()
    assert Path(SHOTS).is_dir()


# the page's own requests, recorded: `fetch` wrapped from outside the page (WebDriver's script
# runs outside the page's Content Security Policy), then the URLs it asked, in order
RECORD_REQUESTS = """
window.asked = [];
const sent = window.fetch;
window.fetch = (url, options) => {
  window.asked.push(String(url));
  return sent.call(window, url, options);
};
"""


def _searches(driver: WebDriver) -> list[str]:
    return [u for u in driver.execute_script("return window.asked") if "/recall/api/search" in u]


def test_the_page_searches_in_the_servers_mode_unless_one_is_picked(
    semantic_url: str, browser: WebDriver
) -> None:
    """Issue 48: the page sent mode=hybrid whatever RECALL_MODE said; it sends a mode only when
    one is picked, and no limit (the API's page size is the one default), and says which mode
    the store used."""
    _sign_in(browser, semantic_url, TOKENS["bob"], expected=len(BOB))
    browser.execute_script(RECORD_REQUESTS)
    status = browser.find_element(By.ID, "status")
    search = browser.find_element(By.CSS_SELECTOR, '[data-testid="search"]')
    search.send_keys("Which instrument do I play?", Keys.ENTER)
    _wait(browser).until(lambda d: "found for" in status.text)
    assert "(semantic, the server's default," in status.text
    mode = Select(browser.find_element(By.CSS_SELECTOR, '[data-testid="mode"]'))
    assert mode.first_selected_option.text == "default mode (semantic)"
    [asked] = _searches(browser)
    assert "mode=" not in asked and "limit=" not in asked, asked

    mode.select_by_value("keyword")
    search.send_keys(Keys.ENTER)
    _wait(browser).until(lambda d: "(keyword," in status.text)
    assert "default" not in status.text
    assert "mode=keyword" in _searches(browser)[-1]
    browser.save_screenshot(str(SHOTS / "5-picked-mode.png"))
