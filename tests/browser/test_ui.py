"""What a newcomer sees after the demo, in a real browser: the asset graph with every asset
materialised, the evaluation report's plots rendered in the Dagster UI, the MLflow run behind an
asset one click away, and MLflow's compare page lining up the runs.

Runs `dagster dev` and `mlflow server` and a CI-scale pipeline (see conftest.py), about 15-25
minutes on one busy core: `pytest -m browser` selects it, `-m "not browser"` leaves it out.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest
from mlflow.tracking import MlflowClient
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from tests.browser.chromium import Chromium, headless
from tests.browser.stack import Stack

pytestmark = [pytest.mark.browser, pytest.mark.slow]

T = TypeVar("T")
PAGE_TIMEOUT_SECONDS = 90
WELCOME_SECONDS = 15  # how long the first Dagster page may take to ask for a sign-up
EXPAND_AGAIN_SECONDS = 10
LINEAGE = "/asset-groups"  # the global asset graph, one box per group
NODE_STATES = """
return Array.from(document.querySelectorAll('foreignObject')).flatMap(node => {
  const name = node.querySelector('[class*="AssetNode_assetName"]');
  if (!name) return [];
  const html = node.innerHTML;
  return [[name.textContent.trim(),
           html.includes('background-green') || node.textContent.includes('Materialized')]];
});
"""
IMAGES = (
    "return Array.from(document.querySelectorAll('img'))"
    ".map(i => [i.alt, i.complete && i.naturalWidth > 0])"
)


@pytest.fixture(scope="module")
def browser(chromium: Chromium) -> Iterator[Any]:
    with headless(chromium) as driver:
        yield driver


def poll(probe: Callable[[], T | None], what: str, driver: Any, shot: Path) -> T:
    """Wait for the page to show `what` (`probe` returns it); on timeout keep a screenshot."""
    deadline = time.monotonic() + PAGE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1.0)
    driver.save_screenshot(str(shot))
    raise AssertionError(f"the page never showed {what}; see {shot}")


def open_dagster(driver: Any, stack: Stack, path: str) -> None:
    """Open a page; the first visit's newsletter dialog (it covers the page) is skipped."""
    driver.get(stack.dagster + path)
    if driver.execute_script("return localStorage.getItem('hier-test-welcomed')"):
        return
    deadline = time.monotonic() + WELCOME_SECONDS
    while time.monotonic() < deadline:
        skip = driver.find_elements("xpath", "//button[normalize-space()='Skip']")
        if skip:
            skip[0].click()
            break
        time.sleep(0.5)
    driver.execute_script("localStorage.setItem('hier-test-welcomed', '1')")


def full_run_assets() -> set[str]:
    from assets.definitions import defs

    job = defs.resolve_job_def("full_retrain_job")
    return {key.to_user_string() for key in job.asset_layer.selected_asset_keys}


def test_asset_graph_shows_every_asset_materialised(stack: Stack, browser: Any) -> None:
    expected = full_run_assets()
    shot = stack.screenshots / "dagster_asset_graph.png"
    open_dagster(browser, stack, LINEAGE)
    last_press = 0.0

    def materialised() -> dict[str, bool] | None:
        nonlocal last_press
        states = dict(browser.execute_script(NODE_STATES))
        if not states and time.monotonic() - last_press > EXPAND_AGAIN_SECONDS:
            # Groups start collapsed; Alt+E ("Expand all groups" in the graph's menu) opens
            # them all. It toggles, so it is pressed again only if nothing opened for a while.
            ActionChains(browser).key_down(Keys.ALT).send_keys("e").key_up(Keys.ALT).perform()
            last_press = time.monotonic()
        return states if all(states.get(name) for name in expected) else None

    states = poll(materialised, f"all of {sorted(expected)} materialised (green)", browser, shot)
    browser.save_screenshot(str(shot))
    assert expected <= {name for name, done in states.items() if done}


def test_evaluation_report_plots_render(stack: Stack, browser: Any) -> None:
    report = next((stack.home / "evaluation").glob("*/report.md")).read_text()
    plots = re.findall(r"!\[([^\]]+)\]\([^)]+\.png\)", report)
    assert plots, "the report references no plots"
    shot = stack.screenshots / "dagster_evaluation_report.png"
    open_dagster(browser, stack, "/assets/evaluation_report")
    poll(
        lambda: browser.find_elements("xpath", "//a[normalize-space()='[Show Markdown]']"),
        "the report's metadata entry",
        browser,
        shot,
    )[0].click()

    def rendered() -> dict[str, bool] | None:
        images = dict(browser.execute_script(IMAGES))
        return images if all(images.get(alt) for alt in plots) else None

    poll(rendered, f"the plots {plots} decoded", browser, shot)
    time.sleep(1)  # the dialog fades in
    browser.save_screenshot(str(shot))
    for index, image in enumerate(browser.find_elements("css selector", "img[alt]")):
        image.screenshot(str(stack.screenshots / f"dagster_report_plot_{index}.png"))
    assert "Target-stage retrieval" in browser.find_element("tag name", "body").text


def test_asset_page_links_to_its_mlflow_run(stack: Stack, browser: Any) -> None:
    shot = stack.screenshots / "mlflow_run_from_dagster.png"
    open_dagster(browser, stack, "/assets/interest_model")
    link = poll(
        lambda: browser.find_elements("css selector", f"a[href^='{stack.mlflow}/#/experiments/']"),
        f"a link into {stack.mlflow}",
        browser,
        shot,
    )[0]
    run_id = link.get_attribute("href").rsplit("/", 1)[-1]
    name = MlflowClient(tracking_uri=stack.mlflow).get_run(run_id).info.run_name
    browser.get(link.get_attribute("href"))
    poll(lambda: name in browser.find_element("tag name", "body").text, name, browser, shot)
    browser.save_screenshot(str(shot))


def test_mlflow_compare_page_lines_up_the_runs(stack: Stack, browser: Any) -> None:
    client = MlflowClient(tracking_uri=stack.mlflow)
    experiment = client.get_experiment_by_name("hier-pipeline")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], "tags.stage = 'evaluation_report'")
    assert len(runs) == 2, [run.info.run_name for run in runs]  # the full run and the re-evaluation
    assert {run.data.tags["dagster_run_id"] for run in runs} == set(stack.runs.values())
    ids = json.dumps([run.info.run_id for run in runs], separators=(",", ":"))
    experiments = json.dumps([experiment.experiment_id])
    shot = stack.screenshots / "mlflow_compare.png"
    browser.get(f"{stack.mlflow}/#/compare-runs?runs={quote(ids)}&experiments={quote(experiments)}")
    names = [run.info.run_name for run in runs]
    # MLflow lists the metrics both runs share in one table (a scrolled window of it shows):
    # an `eval/<model>/<metric>` row means their names lined up.
    shared = re.compile(r"eval/\w+/(map|recall|ndcg)_at_\d+")
    assert all("eval/hier/map_at_10" in run.data.metrics for run in runs)
    tags = [run.data.tags["dagster_run_id"] for run in runs] + ["config_hash", "git_commit"]

    def listed() -> bool:
        text = browser.find_element("tag name", "body").text
        return all(word in text for word in names + tags) and bool(shared.search(text))

    poll(listed, f"the runs {names}, their tags and a shared eval/ metric", browser, shot)
    browser.save_screenshot(str(shot))
