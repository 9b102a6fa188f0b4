# Malformed RESP: a clear error, that connection closed, everyone else served.

proc expect_protocol_error {bytes pattern} {
    set c [new_client]
    catch {$c write $bytes}
    set err [assert_error $pattern {$c read}]
    assert_equal 1 [$c wait_closed] "(connection not closed after: $err)"
    $c close
    assert_equal PONG [r ping]
}

start_server {} {
    test "invalid multibulk lengths" {
        foreach n {2147483648 9223372036854775807 99999999999999999999 abc 1x} {
            expect_protocol_error "*$n\r\n" "ERR Protocol error: invalid multibulk length"
        }
    }

    test "huge multibulk count is rejected fast, others still served" {
        set other [new_client]
        set t0 [clock milliseconds]
        expect_protocol_error "*2147483648\r\n\$4\r\nPING\r\n" "ERR Protocol error: invalid multibulk length"
        assert {[clock milliseconds] - $t0 < [scaled_ms 2000]}
        assert_equal PONG [$other ping]
        $other close
    }

    test "large but valid multibulk count allocates nothing up front" {
        # A peer announcing a billion arguments must not make the server
        # reserve room for them; it may refuse or wait for the rest.
        set c [new_client 500]
        $c write "*1000000000\r\n\$3\r\nGET\r\n"
        catch {$c read}
        $c close
        assert_equal PONG [r ping]
    }

    test "invalid bulk lengths" {
        foreach n {-1 -5 abc 99999999999999999999 9223372036854775807} {
            expect_protocol_error "*2\r\n\$3\r\nGET\r\n\$$n\r\n" "ERR Protocol error: invalid bulk length"
        }
    }

    test "missing '\$' before a bulk" {
        expect_protocol_error "*1\r\nxPING\r\n" "ERR Protocol error: expected '\$', got 'x'"
    }

    test "junk after a bulk payload" {
        expect_protocol_error "*1\r\n\$4\r\nPINGxx\r\n" "ERR Protocol error: bulk not followed by CRLF"
    }

    test "server keeps serving after all the bad clients" {
        assert_equal OK [r set perr:after ok]
        assert_equal ok [r get perr:after]
    }
}
