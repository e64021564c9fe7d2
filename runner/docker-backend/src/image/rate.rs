//! A sliding-window limit on pull starts, so a job of many tasks stays under a registry's
//! pull-rate limit (Docker Hub counts manifest requests per window; users ask to stay under
//! 100 a minute). Every attempt counts, retries included, because the registry counts them.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// At most `max` starts in any `window`.
#[derive(Debug)]
pub struct RateLimiter {
    max: usize,
    window: Duration,
    starts: Mutex<VecDeque<Instant>>,
}

impl RateLimiter {
    /// A limiter of `max` starts per `window` (`max` 0 is taken as 1).
    pub fn new(max: u32, window: Duration) -> Self {
        Self {
            max: max.max(1) as usize,
            window,
            starts: Mutex::new(VecDeque::new()),
        }
    }

    /// `max` starts a minute.
    pub fn per_minute(max: u32) -> Self {
        Self::new(max, Duration::from_secs(60))
    }

    /// Waits until a start is allowed and counts it. Returns how long it waited.
    pub async fn acquire(&self) -> Duration {
        let asked = Instant::now();
        loop {
            let wait = {
                let mut starts = self.starts.lock().await;
                let now = Instant::now();
                while starts
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= self.window)
                {
                    starts.pop_front();
                }
                if starts.len() < self.max {
                    starts.push_back(now);
                    return now.duration_since(asked);
                }
                let oldest = *starts.front().expect("full, so not empty");
                (oldest + self.window).saturating_duration_since(now)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paused time: the clock moves only when every task waits, so each wait is exact.
    #[tokio::test(start_paused = true)]
    async fn starts_beyond_the_limit_wait_for_the_window_to_slide() {
        let window = Duration::from_millis(300);
        let limiter = RateLimiter::new(3, window);
        let begin = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.acquire().await, Duration::ZERO);
        }
        assert_eq!(
            limiter.acquire().await,
            window,
            "the fourth waits a whole window"
        );
        assert_eq!(begin.elapsed(), window);
        // The first three have left the window: two more go at once, the next one waits
        // until the fourth leaves it.
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        assert_eq!(limiter.acquire().await, Duration::ZERO);
        assert_eq!(limiter.acquire().await, window);
    }
}
