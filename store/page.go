package store

// FillPage reads pages through read, from resume on, until it holds limit
// (1 to MaxPageSize) entities or nothing remains, and returns them with the
// cursor of what follows (nil when nothing does). A backend may return short
// pages, even empty ones, while more remain; a caller that promises full
// pages but the last fills them here. read gets the cursor to resume at and
// how many entities are still wanted; it may drop entities from what it
// reads, and FillPage reads on.
func FillPage(limit int, resume *Cursor, read func(resume *Cursor, want int) (Page, error)) (Page, error) {
	var out Page
	for {
		page, err := read(resume, limit-len(out.Entities))
		if err != nil {
			return Page{}, err
		}
		out.Entities = append(out.Entities, page.Entities...)
		if page.Next == nil || len(out.Entities) >= limit {
			out.Next = page.Next
			return out, nil
		}
		resume = page.Next
	}
}

// ReadPage is FillPage with each entity of the page decoded: the items
// and the cursor of what follows (nil when nothing does). Every list of
// the repositories reads its pages so.
func ReadPage[T any](limit int, resume *Cursor, read func(resume *Cursor, want int) (Page, error), decode func(Entity) (T, error)) ([]T, *Cursor, error) {
	page, err := FillPage(limit, resume, read)
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, len(page.Entities))
	for i, e := range page.Entities {
		if out[i], err = decode(e); err != nil {
			return nil, nil, err
		}
	}
	return out, page.Next, nil
}

// Decoded is a decoding that cannot fail, as ReadPage takes one.
func Decoded[T any](decode func(Entity) T) func(Entity) (T, error) {
	return func(e Entity) (T, error) { return decode(e), nil }
}
