"""Headless Chromium from the system packages, driven by Selenium: never a downloaded browser.

Debian's `chromium` and `chromium-driver` are installed with apt when they are missing and we run
as root (CI); elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGES = ("chromium", "chromium-driver")
APT_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Chromium:
    browser: Path
    driver: Path


def find_chromium() -> Chromium | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return Chromium(Path(browser), Path(driver)) if browser and driver else None


def ensure_chromium() -> Chromium:
    """The system Chromium and its driver, installed with apt if possible; else skip."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(
            "no chromium/chromedriver on PATH and no way to install them here (needs root and"
            f" apt-get): apt-get install {' '.join(PACKAGES)}"
        )
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
    ):
        done = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=APT_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"could not install {PACKAGES}: {done.stderr.strip()[-500:]}")
    found = find_chromium()
    if not found:
        pytest.skip(f"apt installed {PACKAGES} but chromium/chromedriver are not on PATH")
    return found


@contextmanager
def headless(chromium: Chromium, width: int = 1600, height: int = 1100) -> Iterator[object]:
    """A Selenium Chrome session on the system browser, with an explicit driver path, so that
    Selenium Manager never downloads anything."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium.browser)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(chromium.driver)))
    try:
        yield driver
    finally:
        driver.quit()
