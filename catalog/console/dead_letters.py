"""The dead-letters page of a table: the rows of its `<table>_dlq` table, newest first, a page at a
time (the overview's dead-letter count links here). Read with the signed-in key's read permission on
the dead-letter table, as the table page's sample is; every value is escaped by the templates."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Controller, Request, get
from litestar.di import Provide
from litestar.response import Template

from catalog.auth import Principal
from catalog.console.controllers import _ref, page, provide_reader
from catalog.console.paging import Pages, page_number
from catalog.console.readings import DLQ_SUFFIX, ConsoleReader, TableRef, current_snapshot, live_records
from catalog.console.session import CONSOLE_PATH
from catalog.errors import CatalogError, ServiceUnavailable
from catalog.redrive_audit import redrive_history

log = logging.getLogger(__name__)

DEAD_LETTERS_PER_PAGE = 50


class DeadLettersController(Controller):
    path = CONSOLE_PATH
    dependencies = {"reader": Provide(provide_reader, sync_to_thread=False)}

    @get("/tables/{warehouse:str}/{namespace:str}/{table:str}/dead-letters")
    async def dead_letters_page(
        self,
        request: Request[Any, Any, Any],
        warehouse: str,
        namespace: str,
        table: str,
        principal: Principal,
        reader: ConsoleReader,
    ) -> Template:
        """Page `?page=` of the table's dead letters (its `_dlq` table's rows, newest first)."""
        base = _ref(warehouse, namespace, table)
        dlq = TableRef(base.warehouse, base.namespace, base.name + DLQ_SUFFIX)
        _, metadata = await reader.metadata(dlq)  # authorized: the key reads the dead-letter table
        total = live_records((current_snapshot(metadata) or {}).get("summary") or {}) or 0
        pages = Pages.of(page_number(request.query_params.get("page")), DEAD_LETTERS_PER_PAGE, total)
        try:
            sample = await reader.sample(dlq, pages.size, pages.offset, newest_first=True)
        except CatalogError as exc:
            if not isinstance(exc, ServiceUnavailable):
                raise
            log.warning("dead letters of %s failed: %s", dlq.dotted, exc.message)
            sample = None
        except Exception as exc:  # a file that cannot be read: said so, without its contents or path
            log.warning("dead letters of %s failed: %s", dlq.dotted, type(exc).__name__)
            sample = None
        redrives = redrive_history(metadata)  # `floe dlq redrive` commits (docs/dlq-redrive.md)
        return page(
            request,
            principal,
            "dead_letters.html",
            ref=base,
            dlq=dlq,
            sample=sample,
            pages=pages,
            redrives=redrives,
        )
