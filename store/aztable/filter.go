package aztable

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// filterTimeLayout writes Edm.DateTime literals at the service's precision,
// 100 ns, as store.MarshalEDM writes the values.
const filterTimeLayout = "2006-01-02T15:04:05.0000000Z"

// filter is an OData $filter: conditions that must all hold.
type filter []string

func (f filter) String() string { return strings.Join(f, " and ") }

// keyFrom adds key >= bound unless bound is empty, the open bound.
func (f filter) keyFrom(key, bound string) filter {
	if bound == "" {
		return f
	}
	return append(f, key+" ge "+quote(bound))
}

// keyTo adds key < bound unless bound is empty, the open bound.
func (f filter) keyTo(key, bound string) filter {
	if bound == "" {
		return f
	}
	return append(f, key+" lt "+quote(bound))
}

// quote is s as an OData string literal, its single quotes doubled, so that
// no key or value can end the literal early and change the query.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// where adds the conditions of a query, which the portable layer has
// checked: each names a property and holds a value an entity can store, so
// the service never matches a system property like RowKey or refuses the
// query.
func (f filter) where(conditions []store.Equal) filter {
	for _, c := range conditions {
		if lit, sent := literal(c.Value); sent {
			f = append(f, c.Property+" eq "+lit)
		}
	}
	return f
}

// literal is v as an OData literal of its Edm type, so that the service
// compares like types: a Double needs a decimal point, or it reads as Int32.
//
// sent is false for an Int64, which is left to the check in process (see
// Table.page) rather than sent as 5L: Azurite answers 500 to an Int64
// literal as soon as the query meets an entity whose property of that name
// holds a number of another type. Azure itself takes 5L; no caller filters
// on an Int64 today, so the cost, rows that only the process filters out,
// is nil.
func literal(v any) (_ string, sent bool) {
	switch v := v.(type) {
	case string:
		return quote(v), true
	case bool:
		return strconv.FormatBool(v), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case float64:
		return doubleLiteral(v), true
	case time.Time:
		return "datetime'" + v.UTC().Format(filterTimeLayout) + "'", true
	case []byte:
		return "X'" + hex.EncodeToString(v) + "'", true
	}
	return "", false
}

// doubleLiteral writes a float64 in plain decimal notation with a decimal
// point: the shortest digits that read back as v. OData also allows an
// exponent, but Azurite's parser does not, and plain digits suit both.
func doubleLiteral(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
