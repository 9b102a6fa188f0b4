# Checks the harness itself against a real redis-server (skipped when it is
# not installed), so a harness bug is not mistaken for a server bug.

if {[auto_execok redis-server] eq ""} {
    puts "# harness_selftest: redis-server not installed, self-test skipped"
    return
}

start_server {kind redis} {
    test "assertions catch what they should" {
        assert_error "*expected 'a' got 'b'*" {assert_equal a b}
        assert_error "*expected match*" {assert_match x* yz}
        assert_error "*expected error*" {assert_error * {set x 1}}
        assert_equal 3 [llength {a b c}]
    }

    test "RESP2 reply types" {
        assert_equal {status OK} [r typed set selftest:k v]
        assert_equal {bulk v} [r typed get selftest:k]
        assert_equal {nil {}} [r typed get selftest:missing]
        assert_equal {int 1} [r typed exists selftest:k]
        assert_equal {error {ERR unknown command 'nosuchcmd', with args beginning with: }} \
            [r typed nosuchcmd]
        assert_equal {v {}} [r mget selftest:k selftest:missing]
        assert_error "ERR unknown command*" {r nosuchcmd}
    }

    test "RESP3 reply types" {
        set c [new_client]
        set hello [$c hello 3]
        assert_equal 3 [dict get $hello proto]
        $c del selftest:h selftest:s selftest:z
        $c hset selftest:h f v
        $c sadd selftest:s m
        $c zadd selftest:z 1.5 m
        assert_equal {map {{bulk f} {bulk v}}} [$c typed hgetall selftest:h]
        assert_equal {set {{bulk m}}} [$c typed smembers selftest:s]
        assert_equal {double 1.5} [$c typed zscore selftest:z m]
        assert_equal {nil {}} [$c typed get selftest:missing]
        assert_equal {bool 1} [$c typed eval "redis.setresp(3); return true" 0]
        $c close
    }

    test "pipelining keeps order" {
        set c [new_client]
        for {set i 0} {$i < 1000} {incr i} { $c send echo $i }
        $c flush
        for {set i 0} {$i < 1000} {incr i} { assert_equal $i [$c read] }
        $c close
    }

    test "1 MiB binary value round trip" {
        set v [string repeat "a\r\n\0b" 209716]
        r set selftest:big $v
        assert_equal [zlib crc32 $v] [zlib crc32 [r get selftest:big]]
    }

    test "read times out on a silent server" {
        set c [new_client 300]
        $c write "*2\r\n\$4\r\nECHO\r\n"
        set t0 [clock milliseconds]
        assert_error "timeout*" {$c read}
        assert {[clock milliseconds] - $t0 < 2000}
        $c close
    }

    test "wait_closed sees QUIT close the connection" {
        set c [new_client]
        assert_equal OK [$c quit]
        assert_equal 1 [$c wait_closed 2000]
        $c close
    }

    test "protocol error texts as Redis writes them" {
        set c [new_client]
        $c write "*1\r\nxPING\r\n"
        assert_error "ERR Protocol error: expected '\$', got 'x'" {$c read}
        assert_equal 1 [$c wait_closed]
        $c close
    }
}
