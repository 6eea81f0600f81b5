package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The EDM codec writes properties as Azure Table Storage's JSON does: values
// that JSON cannot type on its own (Int64, DateTime, Binary, and Double so it
// never reads back as Int32) carry a "<name>@odata.type" annotation.
const (
	edmAnnotation = "@odata.type"
	edmInt64      = "Edm.Int64"
	edmDouble     = "Edm.Double"
	edmDateTime   = "Edm.DateTime"
	edmBinary     = "Edm.Binary"
	edmTimeLayout = "2006-01-02T15:04:05.0000000Z"
)

// MarshalEDM encodes properties as an Azure Table Storage JSON object.
func MarshalEDM(props Properties) ([]byte, error) {
	out := make(map[string]any, len(props))
	for name, v := range props {
		switch v := v.(type) {
		case string, bool, int32:
			out[name] = v
		case int64:
			out[name], out[name+edmAnnotation] = strconv.FormatInt(v, 10), edmInt64
		case float64:
			out[name], out[name+edmAnnotation] = v, edmDouble
		case time.Time:
			out[name], out[name+edmAnnotation] = v.UTC().Format(edmTimeLayout), edmDateTime
		case []byte:
			out[name], out[name+edmAnnotation] = base64.StdEncoding.EncodeToString(v), edmBinary
		default:
			return nil, fmt.Errorf("%w: property %s has unsupported type %T", ErrInvalidEntity, name, v)
		}
	}
	return json.Marshal(out)
}

// UnmarshalEDM decodes an Azure Table Storage JSON object into properties,
// skipping OData metadata and the system properties.
func UnmarshalEDM(data []byte) (Properties, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("store: decode entity: %w", err)
	}
	return PropertiesFromEDM(raw)
}

// PropertiesFromEDM is UnmarshalEDM for a caller that has split the JSON
// object into its fields already.
func PropertiesFromEDM(raw map[string]json.RawMessage) (Properties, error) {
	props := make(Properties, len(raw))
	for name, value := range raw {
		if strings.Contains(name, "@") || strings.HasPrefix(name, "odata.") || reservedProperties[name] {
			continue
		}
		var kind string
		if a, ok := raw[name+edmAnnotation]; ok {
			if err := json.Unmarshal(a, &kind); err != nil {
				return nil, fmt.Errorf("store: decode type of %s: %w", name, err)
			}
		}
		if string(value) == "null" {
			continue // Azure omits null properties; a null is an absent value
		}
		v, err := decodeEDMValue(kind, value)
		if err != nil {
			return nil, fmt.Errorf("store: decode %s: %w", name, err)
		}
		props[name] = v
	}
	return props, nil
}

func decodeEDMValue(kind string, value json.RawMessage) (any, error) {
	switch kind {
	case "":
		var v any
		if err := json.Unmarshal(value, &v); err != nil {
			return nil, err
		}
		switch v := v.(type) {
		case float64:
			if v == float64(int32(v)) && !strings.ContainsAny(string(value), ".eE") {
				return int32(v), nil
			}
			return v, nil
		case string, bool:
			return v, nil
		}
		return nil, fmt.Errorf("unsupported JSON value %s", value)
	case edmDouble:
		// Azure sends NaN and the infinities as strings.
		var s string
		if json.Unmarshal(value, &s) == nil {
			switch s {
			case "NaN":
				return math.NaN(), nil
			case "Infinity", "INF":
				return math.Inf(1), nil
			case "-Infinity", "-INF":
				return math.Inf(-1), nil
			}
			return strconv.ParseFloat(s, 64)
		}
		var f float64
		err := json.Unmarshal(value, &f)
		return f, err
	case "Edm.Int32":
		var n int32
		err := json.Unmarshal(value, &n)
		return n, err
	case "Edm.Boolean":
		var b bool
		err := json.Unmarshal(value, &b)
		return b, err
	case edmInt64, edmDateTime, edmBinary, "Edm.String", "Edm.Guid":
		var s string
		if err := json.Unmarshal(value, &s); err != nil {
			return nil, err
		}
		switch kind {
		case edmInt64:
			return strconv.ParseInt(s, 10, 64)
		case edmDateTime:
			t, err := time.Parse(time.RFC3339Nano, s)
			return t.UTC(), err
		case edmBinary:
			return base64.StdEncoding.DecodeString(s)
		}
		return s, nil
	}
	return nil, fmt.Errorf("unsupported type %s", kind)
}
