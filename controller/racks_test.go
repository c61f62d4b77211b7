package controller

import (
	mrand "math/rand/v2"
	"slices"
	"testing"
)

func rackImage(racks map[int32]string) (*Image, []int32) {
	img := newImage("c")
	var ids []int32
	for id, r := range racks {
		img.Brokers[id] = BrokerInfo{ID: id, Rack: r}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return img, ids
}

func checkAssignment(t *testing.T, a [][]int32, rf int, brokers []int32) {
	t.Helper()
	for i, reps := range a {
		if len(reps) != rf {
			t.Fatalf("partition %d: %v, want %d replicas", i, reps, rf)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] || !slices.Contains(brokers, r) {
				t.Fatalf("partition %d: %v repeats or names an unknown broker", i, reps)
			}
			seen[r] = true
		}
	}
}

// Three racks of two brokers, rf=3: every partition has one replica in each rack, and the
// leaders (first replicas) are spread evenly over the six brokers.
func TestRackPlacementOnePerRack(t *testing.T) {
	img, ids := rackImage(map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})
	for seed := range uint64(20) {
		rng := mrand.New(mrand.NewPCG(seed, 1))
		a := placeRackAware(img, ids, nil, 12, 3, rng)
		checkAssignment(t, a, 3, ids)
		leaders := map[int32]int{}
		for i, reps := range a {
			racks := map[string]bool{}
			for _, r := range reps {
				racks[img.Brokers[r].Rack] = true
			}
			if len(racks) != 3 {
				t.Fatalf("seed %d partition %d: %v spans racks %v", seed, i, reps, racks)
			}
			leaders[reps[0]]++
		}
		for _, id := range ids {
			if leaders[id] != 2 {
				t.Fatalf("seed %d: leaders per broker %v, want 2 each", seed, leaders)
			}
		}
	}
}

// Two racks, rf=3: both racks hold replicas of every partition.
func TestRackPlacementTwoRacks(t *testing.T) {
	img, ids := rackImage(map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"})
	for seed := range uint64(20) {
		a := placeRackAware(img, ids, nil, 10, 3, mrand.New(mrand.NewPCG(seed, 2)))
		checkAssignment(t, a, 3, ids)
		for i, reps := range a {
			racks := map[string]bool{}
			for _, r := range reps {
				racks[img.Brokers[r].Rack] = true
			}
			if len(racks) != 2 {
				t.Fatalf("seed %d partition %d: %v spans racks %v", seed, i, reps, racks)
			}
		}
	}
}

// Brokers without a rack form a group of their own (as Kafka 4 places): a partition of rf=2
// over racks {a} and no rack uses both groups; rf equal to the broker count uses every broker.
func TestRackPlacementMixed(t *testing.T) {
	img, ids := rackImage(map[int32]string{1: "a", 2: "", 3: "a", 4: ""})
	for seed := range uint64(20) {
		a := placeRackAware(img, ids, nil, 8, 2, mrand.New(mrand.NewPCG(seed, 3)))
		checkAssignment(t, a, 2, ids)
		for i, reps := range a {
			if img.Brokers[reps[0]].Rack == img.Brokers[reps[1]].Rack {
				t.Fatalf("seed %d partition %d: %v in one group", seed, i, reps)
			}
		}
		checkAssignment(t, placeRackAware(img, ids, nil, 5, 4, mrand.New(mrand.NewPCG(seed, 4))), 4, ids)
	}
}

// Adding partitions continues after the topic's last partition: the next rack after its
// leader's rack leads the first new partition.
func TestRackPlacementContinues(t *testing.T) {
	img, ids := rackImage(map[int32]string{1: "a", 2: "b", 3: "c"})
	existing := []PartitionInfo{{Replicas: []int32{2, 3, 1}}}
	a := placeRackAware(img, ids, existing, 3, 3, mrand.New(mrand.NewPCG(7, 7)))
	checkAssignment(t, a, 3, ids)
	if a[0][0] != 3 || a[1][0] != 1 || a[2][0] != 2 {
		t.Fatalf("leaders of the new partitions %v, want 3, 1, 2", a)
	}
}

// Without racks placement is the round-robin of place, whatever the image.
func TestPlaceNewWithoutRacks(t *testing.T) {
	img, ids := rackImage(map[int32]string{1: "", 2: "", 3: ""})
	got := placeNew(img, ids, nil, 1, 0, 3, 2)
	want := place(ids, 1, 0, 3, 2)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("placeNew %v, place %v", got, want)
		}
	}
}

// A re-registration with another rack updates the broker's rack.
func TestRegisterCarriesRack(t *testing.T) {
	img := newImage("c")
	img2, _ := apply(img, 5, &command{Op: opRegister, BrokerID: 1, Rack: "a"})
	if img2.Brokers[1].Rack != "a" {
		t.Fatalf("rack %q after registration", img2.Brokers[1].Rack)
	}
	img3, _ := apply(img2, 6, &command{Op: opRegister, BrokerID: 1, Rack: "b"})
	if img3.Brokers[1].Rack != "b" {
		t.Fatalf("rack %q after re-registration", img3.Brokers[1].Rack)
	}
	data, err := encodeImage(img3)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeImage(data)
	if err != nil || back.Brokers[1].Rack != "b" {
		t.Fatalf("snapshot round trip: rack %q, %v", back.Brokers[1].Rack, err)
	}
}
