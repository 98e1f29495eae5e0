// Package pricing turns a template and a requested duration into a price in points.
//
// The rules, in order:
//   - a fixed-duration template costs its flat price, and any requested duration is ignored;
//   - an adjustable template needs a duration d in [min, max] and costs durationPrices[d];
//   - a d in range without an entry, or a fixed template without a price, costs the system
//     default price (the manager's --default-price flag).
package pricing

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// DefaultPrice is the system default price in points when the manager is not told otherwise.
const DefaultPrice int64 = 10

// Terms are the pricing-relevant fields of a template.
type Terms struct {
	// Price is the flat price; nil means the default price.
	Price          *int64
	Adjustable     bool
	MinDuration    int32
	MaxDuration    int32
	DurationPrices map[string]int64
}

// ErrDurationRequired is returned when an adjustable template is priced without a duration.
var ErrDurationRequired = errors.New("duration is required for a template with adjustable duration")

// DurationOutOfRangeError says a duration is outside the template's [Min, Max].
type DurationOutOfRangeError struct {
	Duration, Min, Max int32
}

func (e *DurationOutOfRangeError) Error() string {
	return fmt.Sprintf("duration %ds is outside the template's range [%d, %d] seconds", e.Duration, e.Min, e.Max)
}

// InvalidPriceError says a configured price is negative: a template or flag error, not the caller's.
type InvalidPriceError struct {
	What  string
	Price int64
}

func (e *InvalidPriceError) Error() string {
	return fmt.Sprintf("%s price %d is negative", e.What, e.Price)
}

// CheckDefault says what is wrong with a system default price (the --default-price flag of the
// manager and the REST apiserver): a price, as a Template's, is 0 to MaxPoints, the most a
// top-up can credit.
func CheckDefault(p int64) error {
	if p < 0 || p > videogenv1alpha1.MaxPoints {
		return fmt.Errorf("--default-price must be from 0 to %d points (the most a top-up can credit), not %d", videogenv1alpha1.MaxPoints, p)
	}
	return nil
}

// Quote returns the price of one task on a template with these terms. duration may be nil.
func Quote(t Terms, duration *int32, defaultPrice int64) (int64, error) {
	if defaultPrice < 0 {
		return 0, &InvalidPriceError{What: "default", Price: defaultPrice}
	}
	if !t.Adjustable {
		return flat(t.Price, defaultPrice)
	}
	if duration == nil {
		return 0, fmt.Errorf("%w (between %d and %d seconds)", ErrDurationRequired, t.MinDuration, t.MaxDuration)
	}
	d := *duration
	if d < t.MinDuration || d > t.MaxDuration {
		return 0, &DurationOutOfRangeError{Duration: d, Min: t.MinDuration, Max: t.MaxDuration}
	}
	if p, ok := t.DurationPrices[strconv.Itoa(int(d))]; ok {
		if p < 0 {
			return 0, &InvalidPriceError{What: fmt.Sprintf("durationPrices[%d]", d), Price: p}
		}
		return p, nil
	}
	return defaultPrice, nil
}

func flat(price *int64, defaultPrice int64) (int64, error) {
	if price == nil {
		return defaultPrice, nil
	}
	if *price < 0 {
		return 0, &InvalidPriceError{What: "template", Price: *price}
	}
	return *price, nil
}

// Summary is a template's prices in a few words, for a column of `kubectl get templates`: "30",
// "10 (default)", or for an adjustable template its listed durations (at most three, else the
// range of their prices) and what the others cost, e.g. "5s=20, others 10 (default)".
func Summary(t Terms, defaultPrice int64) string {
	if !t.Adjustable {
		if t.Price == nil {
			return fmt.Sprintf("%d (default)", defaultPrice)
		}
		return strconv.FormatInt(*t.Price, 10)
	}
	var listed []int32
	for k := range t.DurationPrices {
		// Only the keys Quote reads ("5", never "05" or "+5", which a template stored before
		// the schema's key rule may keep): any other prices nothing.
		if d, err := strconv.Atoi(k); err == nil && strconv.Itoa(d) == k && int32(d) >= t.MinDuration && int32(d) <= t.MaxDuration {
			listed = append(listed, int32(d))
		}
	}
	if len(listed) == 0 {
		return fmt.Sprintf("%d (default)", defaultPrice)
	}
	slices.Sort(listed)
	price := func(d int32) int64 { return t.DurationPrices[strconv.Itoa(int(d))] }
	var s string
	if len(listed) <= 3 {
		parts := make([]string, len(listed))
		for i, d := range listed {
			parts[i] = fmt.Sprintf("%ds=%d", d, price(d))
		}
		s = strings.Join(parts, ", ")
	} else {
		lo, hi := price(listed[0]), price(listed[0])
		for _, d := range listed[1:] {
			lo, hi = min(lo, price(d)), max(hi, price(d))
		}
		s = fmt.Sprintf("%d-%d by duration", lo, hi)
		if lo == hi {
			s = fmt.Sprintf("%d by duration", lo)
		}
	}
	if len(listed) < int(t.MaxDuration-t.MinDuration+1) {
		s += fmt.Sprintf(", others %d (default)", defaultPrice)
	}
	return s
}
