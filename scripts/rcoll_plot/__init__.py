"""rcoll-plot's pieces: inputs (reading and checking files), bench (lines
against message size), heatmap (the link check). scripts/rcoll-plot runs them."""
