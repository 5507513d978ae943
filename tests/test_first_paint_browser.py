"""The first picture (draw/first_paint.py) in Chromium, against Plotly's own drawing: every
node of a lesson's figure where Plotly puts it, at the widths the page's column takes; and
on the page, a lesson link painted from it while Plotly's code is still on its way, then
Plotly's chart in its place."""
import json
import re
import time

import plotly.offline
import pytest
from playwright import sync_api

from browser_util import ARGS, CHROMIUM, WAIT_MS, assert_no_exception, browser_page, streamlit_server
from builders import keras_like, wxb
from figure_boxes import lesson_figure
from tapeviz.draw import first_paint

pytestmark = pytest.mark.slow   # Chromium, and a Streamlit server for the page's test

PAGE = """<html><head><script>{plotly}</script></head><body style="margin:0;font-family:sans-serif">
<div id="picture" style="width:{width}px">{picture}</div>
<div id="plot" style="width:{width}px"></div>
<script>Plotly.newPlot('plot', {figure}.data, {figure}.layout, {{displayModeBar: false}})</script>
</body></html>"""

# Each node's px from its container's top-left: Plotly's from its own axes; the picture's
# from its image's box and the node's share of the axes (the image's own mapping).
PLACES = """() => {
  const gd = document.getElementById('plot'), L = gd._fullLayout;
  const box = gd.getBoundingClientRect();
  const img = [...document.querySelectorAll('#picture img')].sort((a, b) => b.width - a.width)[0];
  const pic = document.querySelector('#picture').getBoundingClientRect(), r = img.getBoundingClientRect();
  const [x0, x1] = L.xaxis.range, [y0, y1] = L.yaxis.range;
  const out = [];
  gd._fullData.forEach(t => { if (!t.customdata) return; t.x.forEach((x, i) => {
    const y = t.y[i];
    out.push({node: String(t.customdata[i]),
              plotly: [L._size.l + L.xaxis.l2p(x), L._size.t + L.yaxis.l2p(y)],
              picture: [r.left - pic.left + (x - x0) / (x1 - x0) * r.width,
                        r.top - pic.top + (y1 - y) / (y1 - y0) * r.height]});
  }); });
  return out;
}"""


def lessons():
    rec, _ = wxb()
    yield "wxb, its gradient flow", lesson_figure(rec, tape=1, call=0)
    yield "wxb, the tape's ops", lesson_figure(rec, tape=1)
    rec, _ = keras_like()
    yield "a model, layers grouped", lesson_figure(rec, tape=1, call=0, group=True)


@pytest.mark.parametrize("width", [560, 700, 900])
def test_every_node_is_where_plotly_draws_it(tmp_path, width):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": width + 40, "height": 1600})
        try:
            for name, fig in lessons():
                html = tmp_path / "both.html"
                html.write_text(PAGE.format(plotly=plotly.offline.get_plotlyjs(), width=width,
                                            picture=first_paint.picture(fig), figure=fig.to_json()))
                page.goto(html.as_uri())
                page.wait_for_selector("#plot .main-svg")
                places = page.evaluate(PLACES)
                assert places, name
                for place in places:
                    (px, py), (qx, qy) = place["plotly"], place["picture"]
                    assert abs(px - qx) <= 3 and abs(py - qy) <= 3, (name, width, place)
        finally:
            browser.close()


PICTURE_ON_SCREEN = """() => {
  const img = document.querySelector('.st-key-graph_area .tv-first-paint img[src*="svg"]:not([width])');
  if (!img || !img.complete || img.naturalWidth === 0) return null;
  const r = img.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, svg: atob(img.src.split(',')[1])};
}"""


def test_a_lesson_link_is_painted_before_plotlys_code_arrives_then_plotly_takes_its_place():
    """...and a Run's status then says Run -> painted, as the browser timed the paint."""
    held = []
    with streamlit_server() as url, browser_page() as page:
        page.set_viewport_size({"width": 1280, "height": 720})
        page.route(re.compile(r".*/PlotlyChart[^/]*\.js$"), lambda route: held.append(route))   # answered later
        page.goto(f"{url}/?example=higher_order")
        page.wait_for_function(PICTURE_ON_SCREEN, timeout=WAIT_MS, polling=100)
        picture = page.evaluate(PICTURE_ON_SCREEN)
        # the lesson's graph, on screen at 1280x720: its result's node and the colour scale
        assert "dy_dx = 3.0" in picture["svg"] and "grad 6.0" in picture["svg"], picture["svg"][:300]
        assert 0 <= picture["top"] < 720 and picture["left"] >= 0 and picture["right"] <= 1280
        assert page.locator(".tv-first-paint", has_text="size of the gradient").is_visible()
        assert not page.locator(".st-key-graph .main-svg").count()
        for route in held:
            route.continue_()
        page.unroute(re.compile(r".*/PlotlyChart[^/]*\.js$"))
        page.wait_for_selector(".st-key-graph .main-svg", timeout=WAIT_MS)
        # Plotly's chart now shows the lesson, the picture gone; the page's first report
        # reruns it once and the status says when the browser painted it
        page.wait_for_function("() => !document.querySelector('.tv-first-paint')", timeout=WAIT_MS)
        page.get_by_text(re.compile(r"Painted \d+\.\d s after the page opened")).wait_for(timeout=WAIT_MS)
        labels = page.locator(".st-key-graph .textpoint text").evaluate_all("ts => ts.map(t => t.textContent)")
        assert any(label.startswith("dy_dx = 3.0") for label in labels), labels
        assert page.locator(".st-key-graph .js-plotly-plot").is_visible()
        frame = page.frame_locator("iframe[title*='code_editor']")
        frame.locator("#REACT_ACE_EDITOR .ace_content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\nprint('again')", delay=20)
        page.keyboard.press("Control+Enter")
        said = page.get_by_text(re.compile(r"Run → painted in \d+\.\d s"))
        said.wait_for(timeout=WAIT_MS)
        assert "the program" in said.inner_text(), said.inner_text()     # where the time went
        assert not page.locator(".tv-first-paint").count()     # Plotly's code is loaded now
        assert_no_exception(page)
