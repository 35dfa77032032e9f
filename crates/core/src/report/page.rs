//! Lists in answers: capped lists, and pages of a range read from a keyset cursor.

use super::*;
use crate::error::{Error, Result};
use serde::Serialize;

/// A capped list: the first rows, how many there are in all, and whether some
/// were left out.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct List<T> {
    /// Rows in all.
    pub total: usize,
    /// True when `items` holds fewer than `total`.
    pub truncated: bool,
    /// The rows (at most 200).
    pub items: Vec<T>,
}

impl<T> List<T> {
    /// Caps `rows` at `MAX_ROWS`.
    pub fn capped(mut rows: Vec<T>) -> List<T> {
        let total = rows.len();
        rows.truncate(MAX_ROWS);
        List {
            total,
            truncated: total > MAX_ROWS,
            items: rows,
        }
    }
}

/// One page of a long list: the rows from a cursor on, how many there are in all
/// over every page, and the cursor of the page after.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Page<T> {
    /// Rows in all, over every page (as counted for the first page).
    pub total: usize,
    /// True when more rows follow this page.
    pub truncated: bool,
    /// Give it as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// This page's rows (at most 200).
    pub items: Vec<T>,
}

impl<T> Page<T> {
    /// The page made of `rows`, read one past a page (at most `MAX_ROWS + 1`, in the
    /// report's order) from where the cursor pointed: a row past the page means one
    /// follows, and its cursor is the key (`key`) of this page's last row, with the
    /// total (so that later pages need not count again).
    pub fn keyed(total: usize, mut rows: Vec<T>, key: impl Fn(&T) -> [i64; 3]) -> Page<T> {
        let more = rows.len() > MAX_ROWS;
        rows.truncate(MAX_ROWS);
        let next_cursor = if more {
            rows.last().map(|r| {
                Cursor {
                    after: key(r),
                    total: Some(total),
                }
                .to_text()
            })
        } else {
            None
        };
        Page {
            total,
            truncated: more,
            next_cursor,
            items: rows,
        }
    }

    /// The same page with each row made into what the report shows.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            total: self.total,
            truncated: self.truncated,
            next_cursor: self.next_cursor,
            items: self.items.into_iter().map(f).collect(),
        }
    }

    /// `map` with a conversion that may fail: the first error.
    pub fn try_map<U>(
        self,
        f: impl FnMut(T) -> crate::error::Result<U>,
    ) -> crate::error::Result<Page<U>> {
        Ok(Page {
            total: self.total,
            truncated: self.truncated,
            next_cursor: self.next_cursor,
            items: self
                .items
                .into_iter()
                .map(f)
                .collect::<crate::error::Result<_>>()?,
        })
    }
}

/// Where a page starts: just after the row whose sort key is `after` (the last row
/// of the page before). A deep page is then found through an index as fast as the
/// first, and rows added meanwhile never shift a page. It carries the total counted
/// for the first page, so a walk through the pages counts once. Clients see it as
/// the text of `next_cursor` (`a.b.c.total`, integers); the first page has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The sort key of the last row already shown.
    pub after: [i64; 3],
    /// Rows in all, as counted for the first page.
    pub total: Option<usize>,
}

impl Cursor {
    /// Before every row, nothing counted yet.
    pub const START: Cursor = Cursor {
        after: [i64::MIN; 3],
        total: None,
    };

    /// The cursor a client gave back (none: the first page).
    pub fn parse(cursor: Option<&str>) -> Result<Cursor> {
        let Some(text) = cursor else {
            return Ok(Cursor::START);
        };
        let parts: Vec<Option<i64>> = text.trim().split('.').map(|p| p.parse().ok()).collect();
        match parts.as_slice() {
            [Some(a), Some(b), Some(c), Some(total)] if *total >= 0 => Ok(Cursor {
                after: [*a, *b, *c],
                total: Some(*total as usize),
            }),
            _ => Err(
                Error::invalid(format!("cursor {text:?} is not one this report gave")).with_hint(
                    "leave cursor out for the first page, then pass each answer's next_cursor",
                ),
            ),
        }
    }

    /// The text a client is given.
    pub fn to_text(self) -> String {
        let [a, b, c] = self.after;
        format!("{a}.{b}.{c}.{}", self.total.unwrap_or(0))
    }

    /// The first two parts of the key, for the reports whose rows a pair orders.
    pub fn pair(self) -> [i64; 2] {
        [self.after[0], self.after[1]]
    }

    /// The total the first page counted, else `count()`.
    pub fn total_or(self, count: impl FnOnce() -> Result<usize>) -> Result<usize> {
        match self.total {
            Some(total) => Ok(total),
            None => count(),
        }
    }

    /// The total of a list whose page read `rows` (at most `max_rows` + 1): the
    /// one the first page counted; on the first page, when it read no more than a
    /// page, those rows are all of them (nothing is counted); else `count()`.
    pub fn total_from(
        self,
        rows: usize,
        max_rows: usize,
        count: impl FnOnce() -> Result<usize>,
    ) -> Result<usize> {
        match self.total {
            Some(total) => Ok(total),
            None if rows <= max_rows => Ok(rows),
            None => count(),
        }
    }
}
