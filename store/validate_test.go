package store

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// wantErr checks that err wraps want, or is nil when want is nil.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil {
		t.Errorf("%s: %v, want no error", what, err)
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, want)
	}
}

func TestValidateTableName(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		want        error
	}{
		{"shortest", "abc", nil},
		{"longest", "t" + strings.Repeat("a", 62), nil},
		{"letters and digits", "Images2026", nil},
		{"empty", "", ErrInvalidKey},
		{"too short", "ab", ErrInvalidKey},
		{"too long", "t" + strings.Repeat("a", 63), ErrInvalidKey},
		{"starts with a digit", "1images", ErrInvalidKey},
		{"dash", "image-index", ErrInvalidKey},
		{"underscore", "image_index", ErrInvalidKey},
		{"space", "image index", ErrInvalidKey},
		{"non-ASCII letter", "imagé", ErrInvalidKey},
		{"non-ASCII digit", "images٣", ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, fmt.Sprintf("ValidateTableName(%q)", tc.table), ValidateTableName(tc.table), tc.want)
		})
	}
}

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		want      error
	}{
		{"one byte", "a", nil},
		{"spaces and punctuation", "cam 1 ~!@$%^&*()'=+[]{};:,.<>", nil},
		{"non-ASCII", "caméra ☃ 𝄞", nil},
		{"512 ASCII characters", strings.Repeat("k", MaxKeyBytes/2), nil},
		{"512 characters of 2-byte runes", strings.Repeat("é", MaxKeyBytes/2), nil},
		{"256 characters outside the BMP", strings.Repeat("😀", MaxKeyBytes/4), nil},
		{"empty", "", ErrInvalidKey},
		{"513 ASCII characters", strings.Repeat("k", MaxKeyBytes/2+1), ErrInvalidKey},
		{"513 characters of 2-byte runes", strings.Repeat("é", MaxKeyBytes/2+1), ErrInvalidKey},
		{"257 characters outside the BMP", strings.Repeat("😀", MaxKeyBytes/4+1), ErrInvalidKey},
		{"slash", "a/b", ErrInvalidKey},
		{"backslash", `a\b`, ErrInvalidKey},
		{"hash", "a#b", ErrInvalidKey},
		{"question mark", "a?b", ErrInvalidKey},
		{"NUL", "a\x00b", ErrInvalidKey},
		{"tab", "a\tb", ErrInvalidKey},
		{"newline", "a\nb", ErrInvalidKey},
		{"DEL", "a\x7fb", ErrInvalidKey},
		{"C1 control", "a\u0085b", ErrInvalidKey},
		{"invalid UTF-8", "a\xffb", ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, fmt.Sprintf("ValidateKey(%.40q)", tc.key), ValidateKey(tc.key), tc.want)
		})
	}
}

func manyProperties(n int) Properties {
	props := Properties{}
	for i := range n {
		props[fmt.Sprintf("P%03d", i)] = int32(i)
	}
	return props
}

func TestValidateEntity(t *testing.T) {
	valid := Properties{
		"Text": "caméra", "Ok": true, "N": int32(1), "Big": int64(1 << 60), "Price": 2.0,
		"Captured": time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC), "Blob": []byte{1}, "_private": "x", "Ünïcode1": "x",
	}
	oversized := Properties{}
	for i := range 20 {
		oversized[fmt.Sprintf("P%02d", i)] = strings.Repeat("x", 30000)
	}
	for _, tc := range []struct {
		name   string
		entity Entity
		want   error
		// property, when want is not ErrInvalidKey, is what the
		// *PropertyError must name; empty for the entity as a whole.
		property string
	}{
		{"every type", Entity{PartitionKey: "p", RowKey: "r", Properties: valid}, nil, ""},
		{"no properties", Entity{PartitionKey: "p", RowKey: "r"}, nil, ""},
		{"empty partition key", Entity{RowKey: "r"}, ErrInvalidKey, ""},
		{"bad row key", Entity{PartitionKey: "p", RowKey: "a/b"}, ErrInvalidKey, ""},
		{"string of 64 KiB", entityWith("S", strings.Repeat("a", MaxValueBytes/2)), nil, ""},
		{"string over 64 KiB", entityWith("S", strings.Repeat("a", MaxValueBytes/2+1)), ErrTooLarge, "S"},
		// A rune outside the BMP takes two UTF-16 units: 16384 of them are 64 KiB.
		{"astral string of 64 KiB", entityWith("S", strings.Repeat("𝄞", MaxValueBytes/4)), nil, ""},
		{"astral string over 64 KiB", entityWith("S", strings.Repeat("𝄞", MaxValueBytes/4+1)), ErrTooLarge, "S"},
		{"invalid UTF-8 string", entityWith("S", "a\xffb"), ErrInvalidEntity, "S"},
		{"binary of 64 KiB", entityWith("B", make([]byte, MaxValueBytes)), nil, ""},
		{"binary over 64 KiB", entityWith("B", make([]byte, MaxValueBytes+1)), ErrTooLarge, "B"},
		{"entity over 1 MiB", Entity{PartitionKey: "p", RowKey: "r", Properties: oversized}, ErrTooLarge, ""},
		{"252 properties", Entity{PartitionKey: "p", RowKey: "r", Properties: manyProperties(MaxProperties)}, nil, ""},
		{"253 properties", Entity{PartitionKey: "p", RowKey: "r", Properties: manyProperties(MaxProperties + 1)}, ErrTooLarge, ""},
		{"int", entityWith("N", 1), ErrInvalidEntity, "N"},
		{"uint32", entityWith("N", uint32(1)), ErrInvalidEntity, "N"},
		{"float32", entityWith("N", float32(1)), ErrInvalidEntity, "N"},
		{"nil value", entityWith("N", nil), ErrInvalidEntity, "N"},
		{"pointer to time", entityWith("T", &time.Time{}), ErrInvalidEntity, "T"},
		{"NaN", entityWith("F", math.NaN()), ErrInvalidEntity, "F"},
		{"infinity", entityWith("F", math.Inf(-1)), ErrInvalidEntity, "F"},
		{"earliest time", entityWith("T", time.Date(1601, 1, 1, 0, 0, 0, 0, time.UTC)), nil, ""},
		{"latest time", entityWith("T", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)), nil, ""},
		{"time before 1601", entityWith("T", time.Date(1600, 12, 31, 23, 59, 59, 0, time.UTC)), ErrInvalidEntity, "T"},
		{"zero time", entityWith("T", time.Time{}), ErrInvalidEntity, "T"},
		{"reserved PartitionKey", entityWith("PartitionKey", "p"), ErrInvalidEntity, "PartitionKey"},
		{"reserved RowKey", entityWith("RowKey", "r"), ErrInvalidEntity, "RowKey"},
		{"reserved Timestamp", entityWith("Timestamp", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), ErrInvalidEntity, "Timestamp"},
		{"reserved ETag", entityWith("ETag", "e"), ErrInvalidEntity, "ETag"},
		{"empty name", entityWith("", "x"), ErrInvalidEntity, ""},
		{"name starting with a digit", entityWith("1st", "x"), ErrInvalidEntity, "1st"},
		{"name with dash", entityWith("a-b", "x"), ErrInvalidEntity, "a-b"},
		{"name with OData annotation", entityWith("Price@odata.type", "Edm.Double"), ErrInvalidEntity, "Price@odata.type"},
		{"name of 255 characters", entityWith(strings.Repeat("n", 255), "x"), nil, ""},
		{"name of 256 characters", entityWith(strings.Repeat("n", 256), "x"), ErrInvalidEntity, strings.Repeat("n", 256)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEntity(tc.entity)
			wantErr(t, "ValidateEntity", err, tc.want)
			if size, err := checkEntity(tc.entity); err == nil && size != EntitySize(tc.entity) {
				t.Errorf("checkEntity measured %d bytes; EntitySize is %d", size, EntitySize(tc.entity))
			}
			if err == nil || tc.want == ErrInvalidKey {
				return
			}
			var pe *PropertyError
			switch {
			case !errors.As(err, &pe):
				t.Errorf("ValidateEntity: error %v is not a *PropertyError", err)
			case pe.Property != tc.property:
				t.Errorf("ValidateEntity: PropertyError names %.40q, want %.40q", pe.Property, tc.property)
			}
		})
	}
}

func entityWith(name string, value any) Entity {
	return Entity{PartitionKey: "p", RowKey: "r", Properties: Properties{name: value}}
}

func TestEntitySize(t *testing.T) {
	// Azure's formula: 4 + 2 per key character + for each property
	// 8 + 2 per name character + the value's size.
	for _, tc := range []struct {
		name  string
		props Properties
		want  int
	}{
		{"no properties", nil, 4 + 2 + 2},
		{"int32", Properties{"N": int32(1)}, 8 + 8 + 2 + 4},
		{"int64", Properties{"N": int64(1)}, 8 + 8 + 2 + 8},
		{"bool", Properties{"N": true}, 8 + 8 + 2 + 1},
		{"float64", Properties{"N": 1.5}, 8 + 8 + 2 + 8},
		{"time", Properties{"N": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, 8 + 8 + 2 + 8},
		{"string", Properties{"Name": "abc"}, 8 + 8 + 8 + 4 + 6},
		{"binary", Properties{"Blob": []byte{1, 2, 3}}, 8 + 8 + 8 + 4 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EntitySize(Entity{PartitionKey: "p", RowKey: "r", Properties: tc.props}); got != tc.want {
				t.Errorf("EntitySize = %d, want %d", got, tc.want)
			}
		})
	}
}

// namedTable is a Table with only a name, which is all ValidateTransaction reads.
type namedTable struct {
	Table
	name string
}

func (t namedTable) Name() string { return t.name }

func insertOp(pk, rk string) Op {
	return Op{Kind: OpInsert, Entity: Entity{PartitionKey: pk, RowKey: rk}}
}

func insertOps(n int) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = insertOp("p", fmt.Sprintf("r%03d", i))
	}
	return ops
}

func TestValidateBatch(t *testing.T) {
	big := make([]Op, MaxBatchOps)
	for i := range big {
		big[i] = insertOp("p", fmt.Sprintf("r%03d", i))
		big[i].Entity.Properties = Properties{"S": strings.Repeat("x", MaxValueBytes/2)}
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want error
		// index, when not -1, is the operation the *BatchError names.
		index int
	}{
		{"empty", nil, nil, -1},
		{"100 operations", insertOps(MaxBatchOps), nil, -1},
		{"every kind", []Op{
			insertOp("p", "a"),
			{Kind: OpUpsert, Entity: Entity{PartitionKey: "p", RowKey: "b"}, Mode: Replace},
			{Kind: OpUpdate, Entity: Entity{PartitionKey: "p", RowKey: "c"}, IfMatch: "e"},
			{Kind: OpDelete, Entity: Entity{PartitionKey: "p", RowKey: "d"}},
		}, nil, -1},
		{"101 operations", insertOps(MaxBatchOps + 1), ErrInvalidBatch, -1},
		{"over 4 MiB", big, ErrTooLarge, -1},
		{"two partitions", []Op{insertOp("p", "a"), insertOp("p", "b"), insertOp("q", "a")}, ErrInvalidBatch, 2},
		{"same row twice", []Op{insertOp("p", "a"), insertOp("p", "b"), {Kind: OpDelete, Entity: Entity{PartitionKey: "p", RowKey: "a"}}}, ErrInvalidBatch, 2},
		{"invalid key", []Op{insertOp("p", "a"), insertOp("p", "a#b")}, ErrInvalidKey, 1},
		{"invalid delete key", []Op{{Kind: OpDelete, Entity: Entity{PartitionKey: "p", RowKey: ""}}}, ErrInvalidKey, 0},
		{"invalid entity", []Op{insertOp("p", "a"), {Kind: OpUpsert, Entity: entityWith("N", 1)}}, ErrInvalidEntity, 1},
		{"unknown kind", []Op{insertOp("p", "a"), {Kind: OpKind(7), Entity: Entity{PartitionKey: "p", RowKey: "b"}}}, ErrInvalidBatch, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateBatch(tc.ops)
			wantErr(t, "ValidateBatch", err, tc.want)
			wantBatchIndex(t, "ValidateBatch", err, tc.index)
		})
	}
}

func wantBatchIndex(t *testing.T, what string, err error, index int) {
	t.Helper()
	if index < 0 {
		return
	}
	var be *BatchError
	switch {
	case !errors.As(err, &be):
		t.Errorf("%s: error %v is not a *BatchError", what, err)
	case be.Index != index:
		t.Errorf("%s: BatchError.Index = %d, want %d", what, be.Index, index)
	}
}

func TestValidateTransaction(t *testing.T) {
	images, index := namedTable{name: "images"}, namedTable{name: "byminute"}
	on := func(tbl Table, op Op) TableOp { return TableOp{Table: tbl, Op: op} }
	many := make([]TableOp, MaxBatchOps+1)
	for i, op := range insertOps(MaxBatchOps + 1) {
		many[i] = on(images, op)
	}
	for _, tc := range []struct {
		name  string
		ops   []TableOp
		want  error
		index int
	}{
		{"empty", nil, nil, -1},
		{"partitions and tables", []TableOp{on(images, insertOp("p", "a")), on(index, insertOp("q", "b")), on(images, insertOp("q", "a"))}, nil, -1},
		{"same row in two tables", []TableOp{on(images, insertOp("p", "a")), on(index, insertOp("p", "a"))}, nil, -1},
		{"same row twice in one table", []TableOp{on(images, insertOp("p", "a")), on(index, insertOp("p", "a")), on(images, insertOp("p", "a"))}, ErrInvalidBatch, 2},
		{"101 operations", many, ErrInvalidBatch, -1},
		{"invalid entity", []TableOp{on(index, insertOp("p", "a")), on(images, Op{Kind: OpInsert, Entity: entityWith("N", 1)})}, ErrInvalidEntity, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTransaction(tc.ops)
			wantErr(t, "ValidateTransaction", err, tc.want)
			wantBatchIndex(t, "ValidateTransaction", err, tc.index)
		})
	}
}

func TestPageLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, want int
		err         error
	}{
		{0, MaxPageSize, nil},
		{1, 1, nil},
		{MaxPageSize, MaxPageSize, nil},
		{-1, 0, ErrInvalidQuery},
		{MaxPageSize + 1, 0, ErrInvalidQuery},
	} {
		got, err := PageLimit(tc.limit)
		wantErr(t, fmt.Sprintf("PageLimit(%d)", tc.limit), err, tc.err)
		if err == nil && got != tc.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

func TestMatches(t *testing.T) {
	when := time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)
	props := Properties{"S": "a", "N": int32(1), "L": int64(1), "F": 1.0, "B": true, "T": when, "Blob": []byte{1, 2}}
	for _, tc := range []struct {
		name  string
		where []Equal
		want  bool
	}{
		{"no conditions", nil, true},
		{"string", []Equal{{Property: "S", Value: "a"}}, true},
		{"int32", []Equal{{Property: "N", Value: int32(1)}}, true},
		{"int64 against int32", []Equal{{Property: "N", Value: int64(1)}}, false},
		{"int32 against int64", []Equal{{Property: "L", Value: int32(1)}}, false},
		{"float64 against int32", []Equal{{Property: "N", Value: 1.0}}, false},
		{"float64", []Equal{{Property: "F", Value: 1.0}}, true},
		{"bool", []Equal{{Property: "B", Value: true}}, true},
		{"time in another zone", []Equal{{Property: "T", Value: when.In(time.FixedZone("CET", 3600))}}, true},
		{"other time", []Equal{{Property: "T", Value: when.Add(100)}}, false},
		{"binary", []Equal{{Property: "Blob", Value: []byte{1, 2}}}, true},
		{"binary against string", []Equal{{Property: "Blob", Value: "\x01\x02"}}, false},
		{"string against binary", []Equal{{Property: "S", Value: []byte("a")}}, false},
		{"missing property", []Equal{{Property: "X", Value: "a"}}, false},
		{"every condition", []Equal{{Property: "S", Value: "a"}, {Property: "N", Value: int32(1)}}, true},
		{"one condition fails", []Equal{{Property: "S", Value: "a"}, {Property: "N", Value: int32(2)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Matches(props, tc.where); got != tc.want {
				t.Errorf("Matches(%v) = %t, want %t", tc.where, got, tc.want)
			}
		})
	}
}

func TestEqualProperties(t *testing.T) {
	a := Properties{"N": int32(1), "Blob": []byte{1}}
	for _, tc := range []struct {
		name string
		b    Properties
		want bool
	}{
		{"same", Properties{"N": int32(1), "Blob": []byte{1}}, true},
		{"other type", Properties{"N": int64(1), "Blob": []byte{1}}, false},
		{"missing", Properties{"N": int32(1)}, false},
		{"other name", Properties{"N": int32(1), "Blob2": []byte{1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EqualProperties(a, tc.b); got != tc.want {
				t.Errorf("EqualProperties = %t, want %t", got, tc.want)
			}
		})
	}
	if !EqualProperties(nil, Properties{}) {
		t.Error("EqualProperties(nil, empty) = false, want true")
	}
}
