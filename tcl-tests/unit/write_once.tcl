# Objects are write-once.
start_server {} {
    test "SET on an existing key is -EXISTS, old value stays" {
        assert_equal OK [r set wo:k v1]
        assert_equal {error {EXISTS key already exists}} [r typed set wo:k v2]
        assert_equal v1 [r get wo:k]
        assert_error "EXISTS*" {r put wo:k v3}
        assert_equal v1 [r get wo:k]
    }

    test "SET NX: OK when new, nil when present" {
        assert_equal {status OK} [r typed set wo:nx a NX]
        assert_equal {nil {}} [r typed set wo:nx b NX]
        assert_equal a [r get wo:nx]
    }

    test "overwrite-style options and (without GC) expiries are refused" {
        r set wo:opt v
        foreach opts {XX GET KEEPTTL {EX 10} {PX 100} {EXAT 9999999999} {PXAT 9999999999999}} {
            assert_error "ERR moonkv objects are write-once*" {r set wo:new v {*}$opts}
        }
        assert_equal 0 [r exists wo:new]
        assert_equal v [r get wo:opt]
    }

    test "DEL then SET again succeeds" {
        r set wo:again 1
        assert_equal 1 [r del wo:again]
        assert_equal OK [r set wo:again 2]
        assert_equal 2 [r get wo:again]
    }

    test "write-once holds inside a pipeline" {
        set c [new_client]
        $c send set wo:pipe first
        $c send set wo:pipe second
        $c send get wo:pipe
        $c flush
        assert_equal {status OK} [$c read_typed]
        assert_match {error {EXISTS*}} [$c read_typed]
        assert_equal first [$c read]
        $c close
    }
}

start_server {segment-size 4MB} {
    test "a full segment fails the put with NOSPACE, stored data intact" {
        r set ns:small [string repeat x 1000]
        set mib [string repeat y [expr {1024 * 1024}]]
        set err ""
        for {set i 0} {$i < 10} {incr i} {
            if {[catch {r set ns:fill$i $mib} err]} break
        }
        assert_match "NOSPACE*" $err
        assert_equal 0 [r exists ns:fill$i]
        assert_equal $mib [r get ns:fill0]
        assert_equal [string repeat x 1000] [r get ns:small]
        assert_equal OK [r set ns:after z]
    }
}
