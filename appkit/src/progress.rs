//! A progress bar for the stepping loop, drawn by indicatif on stderr.
//!
//! It is shown only where it helps: when the caller asks for it (rank 0,
//! no `--quiet`), when the run is long enough to watch ([`MIN_STEPS`]) and
//! when stderr is a terminal, so logs and pipes never receive bar frames.

use indicatif::{ProgressBar, ProgressStyle};
use std::borrow::Cow;
use std::io::IsTerminal;

/// Runs shorter than this many steps get no bar.
pub const MIN_STEPS: u64 = 50;

/// The bar's layout: bar, steps done of total, elapsed and remaining time,
/// and the application's message.
const TEMPLATE: &str = "{bar:40} {pos}/{len} steps  {elapsed} < {eta}  {msg}";

/// A progress bar over steps, or nothing.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar over `total` steps when `show` is true, `total` is at least
    /// [`MIN_STEPS`] and stderr is a terminal; otherwise a hidden one whose
    /// methods do nothing.
    pub fn steps(total: u64, show: bool) -> Self {
        Self::with_terminal(total, show, std::io::stderr().is_terminal())
    }

    fn with_terminal(total: u64, show: bool, terminal: bool) -> Self {
        if !(show && terminal && total >= MIN_STEPS) {
            return Self::hidden();
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(TEMPLATE).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Progress { bar: Some(bar) }
    }

    /// A bar that draws nothing.
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Whether anything is drawn.
    pub fn is_visible(&self) -> bool {
        self.bar.is_some()
    }

    /// Advances by `n` steps.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// Sets the text after the bar (a diagnostic of the latest step).
    pub fn set_message(&self, msg: impl Into<Cow<'static, str>>) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
        }
    }

    /// Removes the bar from the terminal (also done on drop).
    pub fn finish(self) {}
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_only_when_asked_long_enough_and_on_a_terminal() {
        assert!(Progress::with_terminal(100, true, true).is_visible());
        assert!(!Progress::with_terminal(100, false, true).is_visible());
        assert!(!Progress::with_terminal(100, true, false).is_visible());
        assert!(!Progress::with_terminal(MIN_STEPS - 1, true, true).is_visible());
        let p = Progress::hidden();
        p.inc(3);
        p.set_message("F 1.0");
        p.finish();
    }
}
