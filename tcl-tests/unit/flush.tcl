# FLUSHALL / FLUSHDB: the caller's own collection of every object.
start_server {} {
    test "FLUSHALL removes every object and frees its space" {
        for {set i 0} {$i < 500} {incr i} { r set flush:$i [string repeat x 1000] }
        assert_equal 500 [r dbsize]
        regexp {used_memory:(\d+)} [r info memory] -> used_before
        assert_equal {status OK} [r typed flushall]
        regexp {used_memory:(\d+)} [r info memory] -> used_after
        assert {$used_after < $used_before - 400000} "used_memory $used_before -> $used_after"
        assert_equal 0 [r dbsize]
        assert_equal {nil {}} [r typed get flush:7]
        assert_equal {array {{bulk 0} {array {}}}} [r typed scan 0]
        # write-once no longer refuses the key: its object is gone
        assert_equal OK [r set flush:7 other-bytes]
        assert_equal other-bytes [r get flush:7]
    }

    test "FLUSHDB and the ASYNC|SYNC forms" {
        r set flush:a 1
        assert_equal OK [r flushdb]
        assert_equal 0 [r dbsize]
        r set flush:b 1
        assert_equal OK [r flushall async]
        r set flush:c 1
        assert_equal OK [r flushdb SYNC]
        assert_equal 0 [r dbsize]
    }

    test "FLUSHALL with a bad argument is a syntax error and removes nothing" {
        r set flush:keep 1
        assert_error "ERR syntax error" {r flushall later}
        assert_error "ERR syntax error" {r flushall async sync}
        assert_equal 1 [r exists flush:keep]
    }
}
