package pebble

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
)

// A stored value is a version byte, the ETag (uvarint length, bytes), the
// write time (varint Unix nanoseconds), then the properties in the layout
// the version names:
//   - valueJSON: EDM JSON, Azure's own entity encoding. Written until the
//     binary layout replaced it and still read, so a store written then
//     opens as it was; its rows change layout only when written again.
//   - valueBinary: a uvarint count, then per property in name order its
//     name (uvarint length, bytes), a type tag and the value. Several times
//     cheaper to write and read than JSON, and typed as the Table contract
//     is: each of its seven types has its own tag, so an int32 never reads
//     back as an int64 nor a whole double as an integer.
const (
	valueJSON   = 1
	valueBinary = 2
)

// Type tags of valueBinary, one per property type of the contract.
const (
	tagString   = 1 // uvarint length, UTF-8 bytes
	tagFalse    = 2 // no payload
	tagTrue     = 3 // no payload
	tagInt32    = 4 // zig-zag varint
	tagInt64    = 5 // zig-zag varint
	tagDouble   = 6 // 8 bytes, IEEE 754 bits little-endian, so every bit survives
	tagDateTime = 7 // uvarint .NET ticks: the 100 ns precision Azure keeps
	tagBinary   = 8 // uvarint length, bytes
)

// encodeValue lays out a stored entity in the current layout.
func encodeValue(e store.Entity) ([]byte, error) {
	names := make([]string, 0, len(e.Properties))
	size := 1 + 2*binary.MaxVarintLen64 + len(e.ETag)
	for name, v := range e.Properties {
		names = append(names, name)
		size += binary.MaxVarintLen64 + len(name) + 1 + binary.MaxVarintLen64
		switch v := v.(type) {
		case string:
			size += len(v)
		case []byte:
			size += len(v)
		}
	}
	slices.Sort(names)
	buf := make([]byte, 0, size)
	buf = append(buf, valueBinary)
	buf = binary.AppendUvarint(buf, uint64(len(e.ETag)))
	buf = append(buf, e.ETag...)
	buf = binary.AppendVarint(buf, e.Timestamp.UnixNano())
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for _, name := range names {
		buf = binary.AppendUvarint(buf, uint64(len(name)))
		buf = append(buf, name...)
		switch v := e.Properties[name].(type) {
		case string:
			buf = append(buf, tagString)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		case bool:
			if v {
				buf = append(buf, tagTrue)
			} else {
				buf = append(buf, tagFalse)
			}
		case int32:
			buf = binary.AppendVarint(append(buf, tagInt32), int64(v))
		case int64:
			buf = binary.AppendVarint(append(buf, tagInt64), v)
		case float64:
			buf = binary.LittleEndian.AppendUint64(append(buf, tagDouble), math.Float64bits(v))
		case time.Time:
			ticks := store.Ticks(v)
			if ticks < 0 || ticks > store.MaxTicks {
				return nil, fmt.Errorf("%w: property %s: time %s outside 0001 to 9999", store.ErrInvalidEntity, name, v.Format(time.RFC3339Nano))
			}
			buf = binary.AppendUvarint(append(buf, tagDateTime), uint64(ticks))
		case []byte:
			buf = append(buf, tagBinary)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		default:
			return nil, fmt.Errorf("%w: property %s has unsupported type %T", store.ErrInvalidEntity, name, v)
		}
	}
	return buf, nil
}

// decodeValue reads a stored value of any layout this build knows.
func decodeValue(partitionKey, rowKey string, value []byte) (store.Entity, error) {
	return decodeSelected(partitionKey, rowKey, value, nil)
}

// decodeSelected reads a stored value with only the selected properties
// (store.Scan.Select; nil selects all). With none selected it reads the
// header alone, ETag and write time, and leaves the properties unread.
func decodeSelected(partitionKey, rowKey string, value []byte, sel []string) (store.Entity, error) {
	if len(value) == 0 {
		return store.Entity{}, fmt.Errorf("%w: empty value", errCorrupt)
	}
	version, rest := value[0], value[1:]
	if version != valueBinary && version != valueJSON {
		return store.Entity{}, fmt.Errorf("%w: unknown value version %d", errCorrupt, version)
	}
	r := reader{rest: rest}
	etag := r.bytes("etag")
	nanos := r.varint("timestamp")
	if r.err != nil {
		return store.Entity{}, r.err
	}
	var props store.Properties
	var err error
	switch {
	case sel != nil && len(sel) == 0:
	case version == valueJSON:
		props, err = store.UnmarshalEDM(r.rest)
	default:
		props, err = r.properties()
	}
	if err != nil {
		return store.Entity{}, err
	}
	if len(sel) > 0 {
		for name := range props {
			if !slices.Contains(sel, name) {
				delete(props, name)
			}
		}
	}
	return store.Entity{
		PartitionKey: partitionKey,
		RowKey:       rowKey,
		Properties:   props,
		ETag:         string(etag),
		Timestamp:    time.Unix(0, nanos).UTC(),
	}, nil
}

// reader walks a value, remembering the first error.
type reader struct {
	rest []byte
	err  error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
	r.rest = nil
}

func (r *reader) uvarint(what string) uint64 {
	n, k := binary.Uvarint(r.rest)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.rest = r.rest[k:]
	return n
}

func (r *reader) varint(what string) int64 {
	n, k := binary.Varint(r.rest)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.rest = r.rest[k:]
	return n
}

// bytes reads a uvarint length and that many bytes.
func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil || n > uint64(len(r.rest)) {
		r.fail(what)
		return nil
	}
	b := r.rest[:n:n]
	r.rest = r.rest[n:]
	return b
}

// properties reads valueBinary properties. Names and string values are
// slices of one string made of the whole remainder, one allocation for all
// of them.
func (r *reader) properties() (store.Properties, error) {
	whole := string(r.rest)
	// text is b, just read from r.rest, as the same bytes of whole.
	text := func(b []byte) string {
		end := len(whole) - len(r.rest)
		return whole[end-len(b) : end]
	}
	count := r.uvarint("property count")
	if r.err != nil || count > uint64(len(r.rest))/2 {
		r.fail("property count")
		return nil, r.err
	}
	props := make(store.Properties, count)
	for range count {
		name := text(r.bytes("property name"))
		if len(r.rest) == 0 {
			r.fail("property type of " + name)
			return nil, r.err
		}
		tag := r.rest[0]
		r.rest = r.rest[1:]
		var v any
		switch tag {
		case tagString:
			v = text(r.bytes(name))
		case tagFalse:
			v = false
		case tagTrue:
			v = true
		case tagInt32:
			n := r.varint(name)
			if n < math.MinInt32 || n > math.MaxInt32 {
				r.fail(name + " is out of Int32 range")
			}
			v = int32(n)
		case tagInt64:
			v = r.varint(name)
		case tagDouble:
			if len(r.rest) < 8 {
				r.fail(name)
				break
			}
			v = math.Float64frombits(binary.LittleEndian.Uint64(r.rest))
			r.rest = r.rest[8:]
		case tagDateTime:
			ticks := r.uvarint(name)
			if ticks > uint64(store.MaxTicks) {
				r.fail(name + " is past 9999")
			}
			v = store.TimeFromTicks(int64(ticks))
		case tagBinary:
			v = bytesCopy(r.bytes(name))
		default:
			r.fail(fmt.Sprintf("property %s has unknown type %d", name, tag))
		}
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := props[name]; dup {
			r.fail("property " + name + " appears twice")
			return nil, r.err
		}
		props[name] = v
	}
	if len(r.rest) != 0 {
		r.fail("bytes after the properties")
		return nil, r.err
	}
	return props, nil
}

// bytesCopy copies a binary value out of the engine's buffer, which is only
// valid until the next read; never nil, so an empty value stays present.
func bytesCopy(b []byte) []byte { return append([]byte{}, b...) }
