"""Scrapy spiders of neardup (``SPIDER_MODULES = ["crawler.spiders"]``)."""

from __future__ import annotations

from crawler.spiders.site import SiteSpider

__all__ = ["SiteSpider"]
