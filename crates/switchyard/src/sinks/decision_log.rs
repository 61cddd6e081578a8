//! The decision log as a sink: one JSON line per finished request.

use super::Sink;
use crate::observe::decision_log::DecisionSink;
use crate::observe::record::Record;

impl Sink for DecisionSink {
    fn finished(&self, r: &Record) {
        if self.is_on() {
            self.write_with(|buf| {
                r.write_line(buf);
                Ok::<(), std::convert::Infallible>(())
            });
        }
    }

    fn wants_input_hash(&self) -> bool {
        self.is_on()
    }
}
