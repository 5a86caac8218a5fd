"""Downloader middlewares of ours, one per module, as Scrapy's ``scrapy/downloadermiddlewares``."""
