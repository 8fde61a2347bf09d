"""Deep links work as the very first request a fresh server gets."""

import pytest

from tests.app_pages import registered_pages
from tests.e2e.conftest import open_app

PAGES = registered_pages()


@pytest.mark.e2e
@pytest.mark.parametrize("target", PAGES, ids=[page.url_path for page in PAGES])
def test_deep_link_as_first_request_opens_that_page_inside_the_router(fresh_server, page, target):
    open_app(page, fresh_server.url, "" if target.default else target.url_path)
    current = page.locator("[data-testid='stSidebarNavLink'][aria-current='page']")
    assert current.inner_text().strip().endswith(target.title)
    # All pages listed means the router ran, not a bare page file in legacy mode.
    assert page.locator("[data-testid='stSidebarNavLink']").count() == len(PAGES)
    assert page.locator("[data-testid='stException']").count() == 0
