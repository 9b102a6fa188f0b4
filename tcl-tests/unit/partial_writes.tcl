# Values that arrive slowly or never finish.
start_server {} {
    test "client disconnecting mid-value leaves no object" {
        set before [r dbsize]
        set c [new_client]
        $c write "*3\r\n\$3\r\nSET\r\n\$4\r\nhalf\r\n\$1000000\r\n"
        $c write [string repeat h 500000]
        $c wait_flushed
        esleep 100
        $c close
        wait_for_condition 2000 {[r exists half] == 0}
        # The dropped client is gone from the list before we count.
        wait_for_condition 2000 {[llength [split [string trim [r client list]] \n]] == 1}
        assert_equal $before [r dbsize]
        assert_equal OK [r set half complete]
        assert_equal complete [r get half]
    }

    test "value sent in tiny chunks with pauses" {
        set v ""
        for {set i 0} {$i < 3000} {incr i} { append v [format %c [expr {$i % 251}]] }
        set msg "*3\r\n\$3\r\nSET\r\n\$4\r\nslow\r\n\$[string length $v]\r\n$v\r\n"
        set c [new_client]
        set pos 0
        set n 0
        while {$pos < [string length $msg]} {
            set len [expr {1 + ($n % 7)}]
            $c write [string range $msg $pos [expr {$pos + $len - 1}]]
            incr pos $len
            # Mostly short pauses, one long one in the middle.
            if {[incr n] == 300} { esleep 300 } elseif {$n % 5 == 0} { esleep 2 }
        }
        assert_equal OK [$c read]
        assert_equal $v [$c get slow]
        $c close
    }

    test "header split at every byte, CR and LF in separate packets" {
        set c [new_client]
        foreach b [split "*2\r\n\$3\r\nGET\r\n\$4\r\nslow\r\n" ""] {
            $c write $b
            esleep 1
        }
        assert_equal 3000 [string length [$c read]]
        $c close
    }

    test "other clients are served while one is stuck mid-value" {
        set c [new_client]
        $c write "*3\r\n\$3\r\nSET\r\n\$5\r\nstuck\r\n\$100\r\nabc"
        assert_equal PONG [r ping]
        assert_equal 0 [r exists stuck]
        $c close
    }
}
