package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// table writes aligned columns, as kubectl get does; callers Flush it.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one tab-separated table row; empty cells print as "-" so columns stay readable.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	_, _ = fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// age is how long before now t was, the way kubectl prints ages ("5m", "3d4h"); "-" when unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// until is how long after now t is ("in 29d"), or how long ago it passed ("EXPIRED 2d ago", loud).
func until(t time.Time, now time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + duration.HumanDuration(d)
	}
	return "EXPIRED " + duration.HumanDuration(now.Sub(t)) + " ago"
}

// byteSize prints a size in binary units with one decimal ("1.5 MiB").
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// timestamp prints an absolute time in UTC to the minute, for expiry dates.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }
